//! serde's words for a body of the wrong shape, without the values it quotes: an error
//! answer must not carry back what was sent (a Secret's `data` given as a string, a PIN
//! written as a number), as kube-apiserver's decode errors name only the types.

/// The kinds of value serde quotes after `invalid type: ` or `invalid value: `, each with
/// the quote that follows it.
const QUOTED: [(&str, char); 5] = [("string ", '"'), ("integer ", '`'), ("floating point ", '`'), ("boolean ", '`'), ("character ", '`')];

/// `message` with the value after `invalid type: ` or `invalid value: ` left out, e.g.
/// ``invalid type: integer `1234`, expected a string`` becomes
/// `invalid type: integer, expected a string`.
pub fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = ["invalid type: ", "invalid value: "].iter().filter_map(|p| rest.find(p).map(|i| (i, p.len()))).min() {
        let (start, prefix) = at;
        out.push_str(&rest[..start + prefix]);
        rest = &rest[start + prefix..];
        let Some((kind, quote)) = QUOTED.iter().find(|(kind, quote)| rest.strip_prefix(kind).is_some_and(|r| r.starts_with(*quote))) else {
            continue;
        };
        out.push_str(kind.trim_end());
        rest = &rest[kind.len() + 1..];
        rest = &rest[quoted_len(rest, *quote)..];
    }
    out.push_str(rest);
    out
}

/// How many bytes of `text` the quoted value takes, its closing `quote` included; a
/// string's quotes are Rust's `Debug` escapes, so `\"` does not close it.
fn quoted_len(text: &str, quote: char) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if quote == '"' && !escaped => escaped = true,
            c if c == quote && !escaped => return i + c.len_utf8(),
            _ => escaped = false,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_values_serde_quotes_are_left_out_and_the_types_kept() {
        let cases = [
            (
                "stringData.a: invalid type: integer `123456789`, expected a string",
                "stringData.a: invalid type: integer, expected a string",
            ),
            ("invalid type: boolean `true`, expected a string", "invalid type: boolean, expected a string"),
            ("data: invalid type: string \"TOPSECRET8b\", expected a map", "data: invalid type: string, expected a map"),
            (r#"invalid value: string "a \"b\", expected c", expected x at line 1"#, "invalid value: string, expected x at line 1"),
            ("invalid type: floating point `1.5`, expected i32", "invalid type: floating point, expected i32"),
            ("invalid type: map, expected a string", "invalid type: map, expected a string"),
            ("missing field `name`", "missing field `name`"),
        ];
        for (message, shown) in cases {
            assert_eq!(without_values(message), shown, "{message}");
        }
    }

    #[test]
    fn hostile_text_neither_panics_nor_leaks() {
        for message in
            ["invalid type: string \"never closed", "invalid type: integer `", "invalid type: ", "invalid value: string \"é\\\"ü\""]
        {
            let shown = without_values(message);
            assert!(!shown.contains("never") && !shown.contains('é'), "{message} -> {shown}");
        }
    }
}
