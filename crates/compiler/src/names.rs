//! Which of a namespace's speakers a question names (see `NamesConfig::SpeakerLists`).

/// The speakers among `speakers` that `question` names, in the order of `speakers`.
///
/// A speaker is named by a word of the question equal, in any case, to a word of the speaker's
/// name ("caroline", "Caroline's"); or by a short form: a capitalised word of at least 3 letters,
/// not the question's first word (which is capitalised anyway), that begins a word of exactly one
/// speaker's name ("Mel" for Melanie; "Car" at the start of a question names no one).
pub fn named_speakers<'s>(question: &str, speakers: &'s [String]) -> Vec<&'s str> {
    let names: Vec<Vec<String>> = speakers.iter().map(|s| name_words(s)).collect();
    let mut named = vec![false; speakers.len()];
    for (i, word) in question_words(question).into_iter().enumerate() {
        let lower = word.to_lowercase();
        let mut exact = false;
        for (s, words) in names.iter().enumerate() {
            if words.contains(&lower) {
                named[s] = true;
                exact = true;
            }
        }
        let capitalised = word.chars().next().is_some_and(char::is_uppercase);
        if exact || i == 0 || !capitalised || word.chars().count() < 3 {
            continue;
        }
        let starts: Vec<usize> =
            (0..names.len()).filter(|&s| names[s].iter().any(|w| w.starts_with(&lower))).collect();
        if let [only] = starts[..] {
            named[only] = true;
        }
    }
    speakers.iter().zip(named).filter(|(_, n)| *n).map(|(s, _)| s.as_str()).collect()
}

/// The words of a speaker's name, lowercased (at least two letters each: initials name no one).
fn name_words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect()
}

/// The question's words (letters, with apostrophes inside), without a possessive ending.
fn question_words(question: &str) -> Vec<&str> {
    question
        .split(|c: char| !(c.is_alphabetic() || c == '\'' || c == '\u{2019}'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '\u{2019}'))
        .map(|w| w.strip_suffix("'s").or_else(|| w.strip_suffix("\u{2019}s")).unwrap_or(w))
        .filter(|w| !w.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(question: &str) -> Vec<&'static str> {
        static SPEAKERS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        let speakers = SPEAKERS.get_or_init(|| {
            ["Caroline", "Melanie", "Jon Snow", "Carla"].map(str::to_owned).to_vec()
        });
        named_speakers(question, speakers)
    }

    #[test]
    fn whole_words_in_any_case_with_possessives() {
        assert_eq!(names("When did Caroline go to the parade?"), ["Caroline"]);
        assert_eq!(names("what is melanie's favourite book?"), ["Melanie"]);
        assert_eq!(names("What did Caroline\u{2019}s dog eat?"), ["Caroline"]);
        assert_eq!(names("Where did Jon and Snow meet?"), ["Jon Snow"]);
        assert_eq!(names("Did Melanie meet Caroline?"), ["Caroline", "Melanie"]);
        assert!(names("Where is Carolines?").is_empty(), "not a whole word");
        assert!(names("Who painted the lake?").is_empty());
    }

    #[test]
    fn short_forms_are_capitalised_unambiguous_prefixes_not_first() {
        assert_eq!(names("What did Mel paint?"), ["Melanie"]);
        assert!(names("Mel?").is_empty(), "the first word is capitalised anyway");
        assert!(names("What did Car buy?").is_empty(), "Caroline or Carla");
        assert!(names("What did mel paint?").is_empty(), "short forms are capitalised");
        assert!(names("What did Me say?").is_empty(), "too short");
    }
}
