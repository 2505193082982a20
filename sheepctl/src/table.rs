//! Plain-text tables in kubectl's layout (upper-case headers, columns three spaces apart)
//! and human ages such as `45s`, `5m30s`, `3h`, `2d4h`.

use chrono::Duration;
use shared::model::Time;

const GAP: &str = "   ";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table { headers: headers.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Each column as wide as its widest cell.
    pub fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        widths
    }

    /// The header and every row, each line ending in a newline.
    pub fn render(&self) -> String {
        let widths = self.widths();
        let mut text = line(&self.headers, &widths);
        for row in &self.rows {
            text.push_str(&line(row, &widths));
        }
        text
    }
}

/// One row padded to `widths`; the last cell is not padded. A cell wider than its column
/// pushes the rest of the line right, as kubectl's watch output does.
pub fn line(cells: &[String], widths: &[usize]) -> String {
    let mut text = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            text.push_str(GAP);
        }
        text.push_str(cell);
        if i + 1 < cells.len() {
            let width = widths.get(i).copied().unwrap_or(0);
            text.extend(std::iter::repeat_n(' ', width.saturating_sub(cell.chars().count())));
        }
    }
    text.truncate(text.trim_end().len());
    text.push('\n');
    text
}

/// How long ago `then` was, in kubectl's style; `<unknown>` when there is no time.
pub fn age(now: Time, then: Option<Time>) -> String {
    match then {
        Some(then) => duration(now - then),
        None => "<unknown>".to_string(),
    }
}

/// `45s`, `5m30s` under ten minutes, `42m`, `3h10m` under eight hours, `20h`, `2d4h` under
/// eight days, `30d`, then years. A negative span (clock skew) reads `0s`.
pub fn duration(span: Duration) -> String {
    let seconds = span.num_seconds().max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match () {
        _ if seconds < 120 => format!("{seconds}s"),
        _ if minutes < 10 => with_rest(minutes, 'm', seconds % 60, 's'),
        _ if hours < 3 => format!("{minutes}m"),
        _ if hours < 8 => with_rest(hours, 'h', minutes % 60, 'm'),
        _ if hours < 48 => format!("{hours}h"),
        _ if days < 8 => with_rest(days, 'd', hours % 24, 'h'),
        _ if days < 730 => format!("{days}d"),
        _ => format!("{}y", days / 365),
    }
}

fn with_rest(big: i64, big_unit: char, small: i64, small_unit: char) -> String {
    if small == 0 { format!("{big}{big_unit}") } else { format!("{big}{big_unit}{small}{small_unit}") }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn columns_align_and_lines_do_not_trail_spaces() {
        let mut table = Table::new(["NAME", "STATUS", "NODE"]);
        table.push(vec!["web-server".into(), "Running".into(), "node-1".into()]);
        table.push(vec!["a".into(), "Pending".into(), "".into()]);
        assert_eq!(table.render(), "NAME         STATUS    NODE\nweb-server   Running   node-1\na            Pending\n");
    }

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (330, "5m30s"),
            (600, "10m"),
            (2 * 3600 + 59 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (20 * 3600, "20h"),
            (2 * 86_400 + 4 * 3600, "2d4h"),
            (30 * 86_400, "30d"),
            (800 * 86_400, "2y"),
            (-5, "0s"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(duration(Duration::seconds(seconds)), expected, "{seconds}s");
        }
        let now = chrono::Utc.with_ymd_and_hms(2025, 1, 1, 12, 0, 0).unwrap();
        assert_eq!(age(now, Some(now - Duration::seconds(90))), "90s");
        assert_eq!(age(now, None), "<unknown>");
    }
}
