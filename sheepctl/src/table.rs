//! Plain-text tables in kubectl's layout: upper-case headers, columns three spaces apart.

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

    /// Each column as wide as its widest cell and never narrower than `remembered`, the
    /// widths an earlier page was printed with: kubectl's remembered widths, so that the
    /// columns of a list printed a page at a time only ever move right.
    pub fn widths_after(&self, remembered: &[usize]) -> Vec<usize> {
        let mut widths = self.widths();
        for (width, before) in widths.iter_mut().zip(remembered) {
            *width = (*width).max(*before);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_lines_do_not_trail_spaces() {
        let mut table = Table::new(["NAME", "STATUS", "NODE"]);
        table.push(vec!["web-server".into(), "Running".into(), "node-1".into()]);
        table.push(vec!["a".into(), "Pending".into(), "".into()]);
        assert_eq!(table.render(), "NAME         STATUS    NODE\nweb-server   Running   node-1\na            Pending\n");
        let mut next = Table::new(["NAME", "STATUS", "NODE"]);
        next.push(vec!["b".into(), "ContainerCreating".into(), "n".into()]);
        assert_eq!(next.widths_after(&table.widths()), [10, 17, 6], "never narrower than before, wider when a cell needs it");
    }
}
