//! The Porter stemmer as NLTK's `PorterStemmer()` runs it by default (mode `NLTK_EXTENSIONS`),
//! which LoCoMo's released token F1 applies to every token.
//!
//! Written from the rules of Porter (1980) and the extensions NLTK documents for that mode
//! (`nltk/stem/porter.py`, NLTK 3.9): the irregular-forms pool, words of at most two characters
//! left alone, `ies`/`ied` on four-letter words, `y -> i` only after a consonant, `alli` recursing
//! into step 2, `fulli` and `logi`, and the `cvc` test accepting a two-letter vowel-consonant
//! stem. Characters work as Python string indices: one `char` per code point, anything that is
//! not one of `aeiou` counting as a consonant (`y` by its neighbour). Checked against NLTK's own
//! output by `tests/data/porter_nltk_golden.tsv`.

/// The NLTK default-mode Porter stem of `word` (lowercased first, as NLTK does).
pub fn porter_stem(word: &str) -> String {
    let lower: Vec<char> = word.to_lowercase().chars().collect();
    // NLTK looks the *original* word up in the pool and measures the original's length.
    if let Some(stem) = irregular_form(word) {
        return stem.to_owned();
    }
    if word.chars().count() <= 2 {
        return lower.into_iter().collect();
    }
    let mut w = lower;
    w = step1a(w);
    w = step1b(w);
    w = step1c(w);
    w = step2(w);
    w = step3(w);
    w = step4(w);
    w = step5a(w);
    w = step5b(w);
    w.into_iter().collect()
}

fn irregular_form(word: &str) -> Option<&'static str> {
    Some(match word {
        "sky" | "skies" => "sky",
        "dying" => "die",
        "lying" => "lie",
        "tying" => "tie",
        "news" => "news",
        "innings" | "inning" => "inning",
        "outings" | "outing" => "outing",
        "cannings" | "canning" => "canning",
        "howe" => "howe",
        "proceed" => "proceed",
        "exceed" => "exceed",
        "succeed" => "succeed",
        _ => return None,
    })
}

type Word = Vec<char>;

fn is_consonant(w: &[char], i: usize) -> bool {
    match w[i] {
        'a' | 'e' | 'i' | 'o' | 'u' => false,
        'y' => i == 0 || !is_consonant(w, i - 1),
        _ => true,
    }
}

/// The number of vowel-consonant transitions: m in `[C](VC){m}[V]`.
fn measure(stem: &[char]) -> usize {
    let kinds: Vec<bool> = (0..stem.len()).map(|i| is_consonant(stem, i)).collect();
    kinds.windows(2).filter(|pair| !pair[0] && pair[1]).count()
}

fn contains_vowel(stem: &[char]) -> bool {
    (0..stem.len()).any(|i| !is_consonant(stem, i))
}

fn ends_double_consonant(w: &[char]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

fn ends_cvc(w: &[char]) -> bool {
    let n = w.len();
    let classic = n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], 'w' | 'x' | 'y');
    classic || (n == 2 && !is_consonant(w, 0) && is_consonant(w, 1))
}

fn ends_with(w: &[char], suffix: &str) -> bool {
    let s: Vec<char> = suffix.chars().collect();
    w.len() >= s.len() && w[w.len() - s.len()..] == s[..]
}

fn strip(w: &[char], suffix: &str) -> Word {
    w[..w.len() - suffix.chars().count()].to_vec()
}

fn with(mut stem: Word, replacement: &str) -> Word {
    stem.extend(replacement.chars());
    stem
}

/// The condition of one rule, evaluated on the stem left after removing the suffix.
#[derive(Clone, Copy)]
enum Cond {
    Always,
    PositiveMeasure,
    MeasureAbove1,
    /// Step 4's `ion`: m > 1 and the stem ends in `s` or `t`.
    IonStem,
}

fn holds(cond: Cond, stem: &[char]) -> bool {
    match cond {
        Cond::Always => true,
        Cond::PositiveMeasure => measure(stem) > 0,
        Cond::MeasureAbove1 => measure(stem) > 1,
        Cond::IonStem => measure(stem) > 1 && matches!(stem.last(), Some('s' | 't')),
    }
}

/// NLTK's `_apply_rule_list`: the first rule whose suffix matches decides, whether or not its
/// condition holds.
fn apply_rules(w: Word, rules: &[(&str, &str, Cond)]) -> Word {
    for &(suffix, replacement, cond) in rules {
        if ends_with(&w, suffix) {
            let stem = strip(&w, suffix);
            return if holds(cond, &stem) { with(stem, replacement) } else { w };
        }
    }
    w
}

fn step1a(w: Word) -> Word {
    if ends_with(&w, "ies") && w.len() == 4 {
        return with(strip(&w, "ies"), "ie");
    }
    apply_rules(
        w,
        &[
            ("sses", "ss", Cond::Always),
            ("ies", "i", Cond::Always),
            ("ss", "ss", Cond::Always),
            ("s", "", Cond::Always),
        ],
    )
}

fn step1b(w: Word) -> Word {
    if ends_with(&w, "ied") {
        let replacement = if w.len() == 4 { "ie" } else { "i" };
        return with(strip(&w, "ied"), replacement);
    }
    if ends_with(&w, "eed") {
        let stem = strip(&w, "eed");
        return if measure(&stem) > 0 { with(stem, "ee") } else { w };
    }
    let mut intermediate = None;
    for suffix in ["ed", "ing"] {
        if ends_with(&w, suffix) {
            let stem = strip(&w, suffix);
            if contains_vowel(&stem) {
                intermediate = Some(stem);
                break;
            }
        }
    }
    let Some(stem) = intermediate else { return w };
    for (suffix, replacement) in [("at", "ate"), ("bl", "ble"), ("iz", "ize")] {
        if ends_with(&stem, suffix) {
            return with(strip(&stem, suffix), replacement);
        }
    }
    if ends_double_consonant(&stem) {
        // The double-consonant rule keeps the word when its last letter is l, s or z.
        let last = stem[stem.len() - 1];
        return if matches!(last, 'l' | 's' | 'z') {
            stem
        } else {
            stem[..stem.len() - 1].to_vec()
        };
    }
    // The catch-all rule has the empty suffix: it adds `e` to a short cvc stem.
    if measure(&stem) == 1 && ends_cvc(&stem) { with(stem, "e") } else { stem }
}

fn step1c(w: Word) -> Word {
    let n = w.len();
    if n >= 1 && w[n - 1] == 'y' {
        let stem = &w[..n - 1];
        if stem.len() > 1 && is_consonant(stem, stem.len() - 1) {
            return with(stem.to_vec(), "i");
        }
    }
    w
}

fn step2(w: Word) -> Word {
    if ends_with(&w, "alli") && measure(&strip(&w, "alli")) > 0 {
        return step2(with(strip(&w, "alli"), "al"));
    }
    use Cond::PositiveMeasure as P;
    let rules = [
        ("ational", "ate", P),
        ("tional", "tion", P),
        ("enci", "ence", P),
        ("anci", "ance", P),
        ("izer", "ize", P),
        ("bli", "ble", P),
        ("alli", "al", P),
        ("entli", "ent", P),
        ("eli", "e", P),
        ("ousli", "ous", P),
        ("ization", "ize", P),
        ("ation", "ate", P),
        ("ator", "ate", P),
        ("alism", "al", P),
        ("iveness", "ive", P),
        ("fulness", "ful", P),
        ("ousness", "ous", P),
        ("aliti", "al", P),
        ("iviti", "ive", P),
        ("biliti", "ble", P),
        ("fulli", "ful", P),
    ];
    for &(suffix, replacement, cond) in &rules {
        if ends_with(&w, suffix) {
            let stem = strip(&w, suffix);
            return if holds(cond, &stem) { with(stem, replacement) } else { w };
        }
    }
    // `logi -> log`, measured on the word without its last three letters (the `l` stays).
    if ends_with(&w, "logi") {
        let condition_stem = &w[..w.len() - 3];
        return if measure(condition_stem) > 0 { with(strip(&w, "logi"), "log") } else { w };
    }
    w
}

fn step3(w: Word) -> Word {
    use Cond::PositiveMeasure as P;
    apply_rules(
        w,
        &[
            ("icate", "ic", P),
            ("ative", "", P),
            ("alize", "al", P),
            ("iciti", "ic", P),
            ("ical", "ic", P),
            ("ful", "", P),
            ("ness", "", P),
        ],
    )
}

fn step4(w: Word) -> Word {
    use Cond::MeasureAbove1 as M;
    apply_rules(
        w,
        &[
            ("al", "", M),
            ("ance", "", M),
            ("ence", "", M),
            ("er", "", M),
            ("ic", "", M),
            ("able", "", M),
            ("ible", "", M),
            ("ant", "", M),
            ("ement", "", M),
            ("ment", "", M),
            ("ent", "", M),
            ("ion", "", Cond::IonStem),
            ("ou", "", M),
            ("ism", "", M),
            ("ate", "", M),
            ("iti", "", M),
            ("ous", "", M),
            ("ive", "", M),
            ("ize", "", M),
        ],
    )
}

fn step5a(w: Word) -> Word {
    if w.last() == Some(&'e') {
        let stem = w[..w.len() - 1].to_vec();
        let m = measure(&stem);
        if m > 1 || (m == 1 && !ends_cvc(&stem)) {
            return stem;
        }
    }
    w
}

fn step5b(w: Word) -> Word {
    // `ll -> l` when the word without its last letter has m > 1.
    if ends_with(&w, "ll") && measure(&w[..w.len() - 1]) > 1 {
        return w[..w.len() - 1].to_vec();
    }
    w
}

#[cfg(test)]
mod tests {
    use super::porter_stem;

    #[test]
    fn examples_from_the_paper_and_nltk_extensions() {
        for (word, stem) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "tie"),
            ("cats", "cat"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("generalizations", "gener"),
            ("dying", "die"),
            ("skies", "sky"),
            ("at", "at"),
            ("Running", "run"),
        ] {
            assert_eq!(porter_stem(word), stem, "{word}");
        }
    }
}
