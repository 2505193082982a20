//! docs/workshop.md read as a script: its fenced blocks in order, each command of a block
//! on its own, and the few marks that say where a command runs and what it prints.
//!
//! - ```` ```sh ```` blocks run in the participant's terminal, one shell for the whole
//!   session, in order.
//! - ```` ```sh terminal=NAME ```` blocks run in a terminal of their own; the block's last
//!   command keeps running there.
//! - ```` ```sh skip ```` blocks are alternatives the test does not run.
//! - Any other fenced block shows what the last command run before it prints.
//! - A command whose comment ends in `Ctrl-C` keeps running until it is interrupted.
//! - `<!-- workshop: Ctrl-C NAME -->` is the Ctrl-C that the text around it asks for in
//!   terminal NAME.
//! - `<!-- workshop: dashboard WHAT -->` is what the text around it does in the dashboard
//!   (the test knows each WHAT).

/// One thing to do, in the order of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Commands to run in `terminal` (`None`: the participant's).
    Commands { terminal: Option<String>, commands: Vec<Command>, line: usize },
    /// What the last command printed, as the text shows it.
    Output { text: String, line: usize },
    /// Ctrl-C in the named terminal.
    Interrupt { terminal: String, line: usize },
    /// What the text has participants do in the dashboard, in a word or two.
    Dashboard { what: String, line: usize },
}

/// One complete shell command of a block: a line, or several joined by `\`, a here-document,
/// an open loop, brace or parenthesis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub text: String,
    /// The line of the markdown file it starts on, from 1.
    pub line: usize,
}

impl Command {
    /// Whether it keeps running until Ctrl-C: its comment says so.
    pub fn runs_until_interrupted(&self) -> bool {
        self.text.lines().any(|line| comment(line).is_some_and(|c| c.trim_end().ends_with("Ctrl-C")))
    }
}

/// Why the markdown cannot be read as a script.
#[derive(Debug, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "docs/workshop.md line {}: {}", self.line, self.message)
    }
}

const DIRECTIVE: &str = "<!-- workshop: ";

/// The steps of `markdown`, in order.
pub fn steps(markdown: &str) -> Result<Vec<Step>, Error> {
    let mut steps = Vec::new();
    let mut lines = markdown.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((line, text)) = lines.next() {
        if let Some(directive) = text.trim().strip_prefix(DIRECTIVE) {
            let directive = directive
                .strip_suffix("-->")
                .map(str::trim)
                .ok_or_else(|| Error { line, message: "a workshop mark ends in -->".into() })?;
            if let Some(what) = directive.strip_prefix("dashboard ") {
                steps.push(Step::Dashboard { what: what.trim().to_string(), line });
                continue;
            }
            let terminal = directive.strip_prefix("Ctrl-C ").ok_or_else(|| Error {
                line,
                message: format!("unknown workshop mark {directive:?} (known: Ctrl-C NAME, dashboard WHAT)"),
            })?;
            steps.push(Step::Interrupt { terminal: terminal.trim().to_string(), line });
            continue;
        }
        let Some(info) = text.strip_prefix("```") else { continue };
        let mut body = Vec::new();
        loop {
            match lines.next() {
                Some((_, "```")) => break,
                Some(numbered) => body.push(numbered),
                None => return Err(Error { line, message: "the block is never closed".into() }),
            }
        }
        let mut words = info.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("sh"), None, _) => steps.push(Step::Commands { terminal: None, commands: commands(&body)?, line }),
            (Some("sh"), Some("skip"), None) => {}
            (Some("sh"), Some(mark), None) if mark.starts_with("terminal=") => {
                let terminal = Some(mark["terminal=".len()..].to_string());
                steps.push(Step::Commands { terminal, commands: commands(&body)?, line });
            }
            (Some("sh"), _, _) => return Err(Error { line, message: format!("unknown marks on a sh block: {info:?}") }),
            _ => steps.push(Step::Output { text: body.iter().map(|(_, l)| format!("{l}\n")).collect(), line }),
        }
    }
    Ok(steps)
}

/// The complete commands of a block's numbered lines; comment-only and blank lines between
/// them are dropped.
fn commands(body: &[(usize, &str)]) -> Result<Vec<Command>, Error> {
    let mut commands = Vec::new();
    let mut current: Option<(Command, Open)> = None;
    for &(line, text) in body {
        let (command, mut open) = match current.take() {
            Some((mut command, open)) => {
                command.text.push('\n');
                command.text.push_str(text);
                (command, open)
            }
            None if text.trim().is_empty() || text.trim_start().starts_with('#') => continue,
            None => (Command { text: text.to_string(), line }, Open::default()),
        };
        open.read(text);
        if open.is_closed() {
            commands.push(command);
        } else {
            current = Some((command, open));
        }
    }
    match current {
        Some((command, _)) => Err(Error { line: command.line, message: format!("the command is never completed: {}", command.text) }),
        None => Ok(commands),
    }
}

/// What a command has opened and not yet closed, line by line: a here-document, quotes,
/// parentheses, `do … done`, `if … fi` and `{ … }` (a function's body), a trailing backslash.
#[derive(Debug, Default)]
struct Open {
    heredoc: Option<String>,
    quote: Option<char>,
    depth: i32,
    continued: bool,
}

impl Open {
    fn is_closed(&self) -> bool {
        self.heredoc.is_none() && self.quote.is_none() && self.depth <= 0 && !self.continued
    }

    fn read(&mut self, line: &str) {
        if let Some(end) = &self.heredoc {
            if line == end {
                self.heredoc = None;
            }
            return;
        }
        self.continued = self.quote.is_none() && line.ends_with('\\');
        let mut word = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if let Some(q) = self.quote {
                if c == q {
                    self.quote = None;
                } else if c == '\\' && q == '"' {
                    chars.next();
                }
                continue;
            }
            match c {
                '\'' | '"' => self.quote = Some(c),
                '\\' => {
                    chars.next();
                }
                '#' if word.is_empty() => break,
                '(' => self.depth += 1,
                ')' => self.depth -= 1,
                '<' if chars.peek() == Some(&'<') => {
                    chars.next();
                    let rest: String = chars.clone().collect();
                    let end = rest.trim_start_matches('-').split_whitespace().next().unwrap_or_default();
                    self.heredoc = Some(end.trim_matches(['\'', '"']).to_string());
                }
                _ => {}
            }
            if c.is_whitespace() || c == ';' {
                self.keyword(&word);
                word.clear();
            } else {
                word.push(c);
            }
        }
        self.keyword(&word);
        if self.quote.is_some() {
            self.continued = false;
        }
    }

    fn keyword(&mut self, word: &str) {
        match word {
            "do" | "if" | "case" | "{" => self.depth += 1,
            "done" | "fi" | "esac" | "}" => self.depth -= 1,
            _ => {}
        }
    }
}

/// The comment at the end of `line`, outside quotes, if any.
fn comment(line: &str) -> Option<&str> {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => return Some(&line[i + 1..]),
            _ => {}
        }
        previous = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(block: &str) -> Vec<String> {
        let body: Vec<(usize, &str)> = block.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
        commands(&body).unwrap().into_iter().map(|c| c.text).collect()
    }

    #[test]
    fn a_command_is_a_line_unless_something_is_left_open() {
        let block = "\
sheepctl info        # Server
# a comment line alone

cat > /tmp/p.json <<'EOF'
{\"kind\": \"Pod\",
 \"spec\": {}}
EOF
for i in 1 2; do
  curl -s \\
    -d '{\"a\": 1}'
done
(echo a
 echo b) > f.txt
bind() {   # a function
  curl -d \"{\\\"a\\\": \\\"$1\\\"}\"
}
sheepctl delete $(sheepctl get pods -o name | head -1)   # one of them";
        assert_eq!(
            texts(block),
            [
                "sheepctl info        # Server",
                "cat > /tmp/p.json <<'EOF'\n{\"kind\": \"Pod\",\n \"spec\": {}}\nEOF",
                "for i in 1 2; do\n  curl -s \\\n    -d '{\"a\": 1}'\ndone",
                "(echo a\n echo b) > f.txt",
                "bind() {   # a function\n  curl -d \"{\\\"a\\\": \\\"$1\\\"}\"\n}",
                "sheepctl delete $(sheepctl get pods -o name | head -1)   # one of them",
            ]
        );
    }

    #[test]
    fn an_unfinished_command_is_an_error() {
        let body = [(7, "for i in 1 2; do"), (8, "  echo $i")];
        assert_eq!(commands(&body).unwrap_err().line, 7);
    }

    #[test]
    fn marks_say_where_a_block_runs() {
        let markdown = "\
# Title
```sh terminal=fleet
shepherd-agent --runtime simulated
```
text
```sh
sheepctl get pods -w   # Running; Ctrl-C
```

```json
{\"error\": 1}
```
```sh skip
never
```
<!-- workshop: Ctrl-C fleet -->
<!-- workshop: dashboard apply examples/pod.json -->
";
        let steps = steps(markdown).unwrap();
        assert_eq!(steps.len(), 5, "{steps:#?}");
        let Step::Commands { terminal: Some(fleet), commands, .. } = &steps[0] else { panic!("{steps:#?}") };
        assert_eq!((fleet.as_str(), commands.len(), commands[0].line), ("fleet", 1, 3));
        let Step::Commands { terminal: None, commands, .. } = &steps[1] else { panic!("{steps:#?}") };
        assert!(commands[0].runs_until_interrupted());
        assert_eq!(steps[2], Step::Output { text: "{\"error\": 1}\n".into(), line: 10 });
        assert_eq!(steps[3], Step::Interrupt { terminal: "fleet".into(), line: 16 });
        assert_eq!(steps[4], Step::Dashboard { what: "apply examples/pod.json".into(), line: 17 });
    }

    #[test]
    fn only_a_comment_says_ctrl_c() {
        let command = |text: &str| Command { text: text.into(), line: 1 };
        assert!(!command("sheepctl get pods").runs_until_interrupted());
        assert!(!command("echo 'Ctrl-C'").runs_until_interrupted());
        assert!(command("sheepctl get pods -w   # Running again; Ctrl-C").runs_until_interrupted());
    }

    #[test]
    fn docs_workshop_md_reads_as_a_script() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/workshop.md")).unwrap();
        let steps = steps(&text).unwrap_or_else(|e| panic!("{e}"));
        let mut opened = Vec::new();
        for step in &steps {
            match step {
                Step::Commands { terminal: Some(name), .. } => opened.push(name.clone()),
                Step::Interrupt { terminal, line } => {
                    assert!(opened.contains(terminal), "line {line}: Ctrl-C in {terminal}, never started")
                }
                _ => {}
            }
        }
        assert_eq!(opened.first().map(String::as_str), Some("shepherd"), "the server starts first");
    }

    #[test]
    fn unknown_marks_are_errors() {
        assert!(steps("```sh quietly\nls\n```\n").is_err());
        assert!(steps("<!-- workshop: pause 5s -->\n").is_err());
        assert!(steps("```sh\nls\n").is_err());
    }
}
