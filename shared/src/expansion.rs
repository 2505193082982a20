//! `$(NAME)` references in a container's `env` values, `command` and `args`, expanded as the
//! kubelet's `expansion` package does: a defined name gives its value, an undefined one stays
//! as written, `$$` is one `$`, and every other `$` is kept. Which names are defined is the
//! caller's (the agent's environment, built in the kubelet's order).

/// `input` with each `$(NAME)` that `lookup` knows replaced by its value.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    // With no `)` past a `$(`, no reference can close there: known without scanning again,
    // which keeps a value made of many `$(` linear.
    let last_close = input.rfind(')');
    let mut out = String::with_capacity(input.len());
    let mut at = 0;
    while let Some(offset) = input[at..].find('$') {
        let dollar = at + offset;
        out.push_str(&input[at..dollar]);
        match input.as_bytes().get(dollar + 1) {
            Some(b'$') => {
                out.push('$');
                at = dollar + 2;
            }
            Some(b'(') => {
                let open = dollar + 1;
                let close = last_close.filter(|&last| last > open).and_then(|_| input[open..].find(')').map(|c| open + c));
                match close {
                    Some(close) => {
                        let reference = &input[dollar..=close];
                        out.push_str(lookup(&input[open + 1..close]).unwrap_or(reference));
                        at = close + 1;
                    }
                    // An unterminated `$(` is text; what follows it is still read.
                    None => {
                        out.push_str("$(");
                        at = open + 1;
                    }
                }
            }
            // A `$` before anything else, or at the end, is kept.
            _ => {
                out.push('$');
                at = dollar + 1;
            }
        }
    }
    out.push_str(&input[at..]);
    out
}

/// A lookup over `(name, value)` pairs: the first pair of that name.
pub fn in_pairs<'a>(pairs: &'a [(String, String)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
    move |name| pairs.iter().find(|(n, _)| n == name).map(|(_, value)| value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variables() -> Vec<(String, String)> {
        [("GREETING", "hello"), ("WHO", "world"), ("NOTHING", ""), ("REF", "$(WHO)")]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn check(cases: &[(&str, &str)]) {
        let variables = variables();
        for (input, expected) in cases {
            assert_eq!(expand(input, in_pairs(&variables)), *expected, "expanding {input:?}");
        }
    }

    #[test]
    fn a_defined_reference_gives_its_value_wherever_it_stands() {
        check(&[
            ("$(GREETING)", "hello"),
            ("$(GREETING), $(WHO)!", "hello, world!"),
            ("say $(GREETING)", "say hello"),
            ("$(GREETING)$(GREETING)", "hellohello"),
            ("[$(NOTHING)]", "[]"),
            ("no references", "no references"),
            ("", ""),
            ("héllo $(WHO) ünïcode", "héllo world ünïcode"),
        ]);
    }

    #[test]
    fn an_undefined_reference_stays_as_written() {
        check(&[("$(UNDEFINED)", "$(UNDEFINED)"), ("a-$(UNDEFINED)-$(WHO)", "a-$(UNDEFINED)-world"), ("$()", "$()")]);
    }

    #[test]
    fn a_value_is_not_expanded_again() {
        check(&[("$(REF)", "$(WHO)"), ("<$(REF)|$(REF)>", "<$(WHO)|$(WHO)>")]);
    }

    #[test]
    fn a_doubled_dollar_is_one_dollar_and_escapes_a_reference() {
        check(&[
            ("$$(GREETING)", "$(GREETING)"),
            ("$$(GREETING) $(WHO)", "$(GREETING) world"),
            ("cost: $$5", "cost: $5"),
            ("$$$(WHO)", "$world"),
            ("$$$$(WHO)", "$$(WHO)"),
            ("$$$$$(UNDEFINED)", "$$$(UNDEFINED)"),
            ("$$", "$"),
            ("$$$", "$$"),
        ]);
    }

    #[test]
    fn a_dollar_without_a_reference_is_kept() {
        check(&[
            ("$GREETING", "$GREETING"),
            ("${GREETING}", "${GREETING}"),
            ("$? and $!", "$? and $!"),
            ("trailing $", "trailing $"),
            ("$(WHO)$", "world$"),
            ("$", "$"),
            ("GREETING)", "GREETING)"),
            ("$GREETING)", "$GREETING)"),
            ("back\\$(WHO)slash", "back\\worldslash"),
            ("$é", "$é"),
        ]);
    }

    #[test]
    fn an_unterminated_reference_is_text_and_what_follows_is_read() {
        check(&[
            ("$(WHO", "$(WHO"),
            ("$(WHO) then $(", "world then $("),
            ("$($($(", "$($($("),
            ("$($$", "$($"),
            ("x-$(WHO-$(GREETING", "x-$(WHO-$(GREETING"),
        ]);
    }

    #[test]
    fn a_reference_ends_at_its_first_closing_parenthesis() {
        check(&[
            // The name read is `WHO$(GREETING`, which is not defined.
            ("$(WHO$(GREETING))", "$(WHO$(GREETING))"),
            ("$(WHO$(GREETING)", "$(WHO$(GREETING)"),
            ("$(a$$b)", "$(a$$b)"),
            ("$($(WHO))", "$($(WHO))"),
        ]);
    }

    #[test]
    fn a_long_run_of_openings_is_kept_or_read_as_one_name() {
        let openings = "$(".repeat(100_000);
        assert_eq!(expand(&openings, in_pairs(&variables())), openings);
        let closed = format!("{openings})");
        assert_eq!(expand(&closed, in_pairs(&variables())), closed);
    }
}
