//! Citations in a reader's reply: `[#12]`, `[#13 #57]`, `[#2, #3]`.

/// Record ids cited in `text` as `[#12]` or `[#13 #57]`, in order of appearance.
pub fn parse_citations(text: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("[#") {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inside = &after[..close];
        let parsed: Option<Vec<u64>> = inside
            .split([' ', ','])
            .filter(|part| !part.is_empty())
            .map(|part| part.strip_prefix('#').and_then(|digits| digits.parse().ok()))
            .collect();
        if let Some(found) = parsed {
            ids.extend(found);
            rest = &after[close + 1..];
        } else {
            rest = &after[1..];
        }
    }
    ids
}

/// `text` without its citations (`[#12]`, `[#13 #57]`), for scoring the answer's words alone:
/// record ids are not part of an answer.
pub fn strip_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("[#") {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inside = &after[..close];
        let is_citation = !inside.is_empty()
            && inside.split([' ', ',']).filter(|p| !p.is_empty()).all(|part| {
                part.strip_prefix('#')
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            });
        out.push_str(&rest[..open]);
        if !is_citation {
            out.push('[');
            rest = after;
            continue;
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_are_parsed_from_brackets() {
        assert_eq!(parse_citations("Lisbon [#12]."), [12]);
        assert_eq!(parse_citations("A [#13 #57] and B [#2, #3]"), [13, 57, 2, 3]);
        assert_eq!(parse_citations("[#x] [#] [12] #4 [#9"), Vec::<u64>::new());
        assert_eq!(parse_citations("[[#7]]"), [7]);
    }

    #[test]
    fn citations_are_stripped_for_scoring() {
        assert_eq!(strip_citations("Lisbon [#12]."), "Lisbon .");
        assert_eq!(strip_citations("A [#13 #57] and B [#2, #3]"), "A  and B");
        assert_eq!(strip_citations("[#x] keeps [12] and [#9"), "[#x] keeps [12] and [#9");
    }
}
