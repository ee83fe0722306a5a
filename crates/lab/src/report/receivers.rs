//! Receivers that saw the same thing, said once: a multicast group's 45 viewers behind one
//! link make one row, named "R1–R45 (45 receivers)", not 45 equal rows.

/// `rows` (a receiver's name and what its row shows, as shown) grouped by what they show,
/// each group in the order of its first receiver: the group's label and the row.
pub fn collapse<T: PartialEq>(rows: Vec<(&str, T)>) -> Vec<(String, T)> {
    let mut groups: Vec<(Vec<&str>, T)> = Vec::new();
    for (name, row) in rows {
        match groups.iter_mut().find(|(_, r)| *r == row) {
            Some((names, _)) => names.push(name),
            None => groups.push((vec![name], row)),
        }
    }
    groups
        .into_iter()
        .map(|(names, row)| (label(&names), row))
        .collect()
}

/// One receiver's name; several as a range when they are one prefix numbered without a gap
/// ("R1–R45 (45 receivers)"), else the first few ("a, b, c and 4 more (7 receivers)").
pub(crate) fn label(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        _ => {
            let n = names.len();
            if let Some((first, last)) = numbered_run(names) {
                return format!("{first}–{last} ({n} receivers)");
            }
            let shown: Vec<&str> = names.iter().take(3).copied().collect();
            if n <= 3 {
                format!("{} ({n} receivers)", shown.join(", "))
            } else {
                format!("{} and {} more ({n} receivers)", shown.join(", "), n - 3)
            }
        }
    }
}

/// The first and last name when every name is one prefix and consecutive numbers.
fn numbered_run<'a>(names: &[&'a str]) -> Option<(&'a str, &'a str)> {
    let split = |s: &'a str| -> Option<(&'a str, u64)> {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, number) = s.split_at(s.len() - digits);
        Some((prefix, number.parse().ok()?))
    };
    let (prefix, start) = split(names[0])?;
    for (k, name) in names.iter().enumerate() {
        let (p, number) = split(name)?;
        if p != prefix || Some(number) != start.checked_add(k as u64) {
            return None;
        }
    }
    Some((names[0], names[names.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_rows_are_one_row_named_by_their_receivers() {
        let rows = vec![("R1", 5), ("R2", 5), ("R3", 7), ("R4", 5), ("R5", 7)];
        assert_eq!(
            collapse(rows),
            vec![
                ("R1, R2, R4 (3 receivers)".to_string(), 5),
                ("R3, R5 (2 receivers)".to_string(), 7)
            ]
        );
        let crowd: Vec<(String, u8)> = (1..=45).map(|i| (format!("R{i}"), 0)).collect();
        let crowd = crowd.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert_eq!(collapse(crowd), vec![("R1–R45 (45 receivers)".into(), 0)]);
    }

    #[test]
    fn labels_say_how_many() {
        assert_eq!(label(&["viewer"]), "viewer");
        assert_eq!(
            label(&["a", "b", "c", "d", "e"]),
            "a, b, c and 2 more (5 receivers)"
        );
        assert_eq!(label(&["R9", "R10", "R11"]), "R9–R11 (3 receivers)");
        assert_eq!(label(&["R1", "R3"]), "R1, R3 (2 receivers)");
        assert_eq!(label(&["x", "x1"]), "x, x1 (2 receivers)");
    }
}
