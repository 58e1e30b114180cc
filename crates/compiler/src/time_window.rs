//! Time in the question: an English relative or absolute time expression resolved against the
//! question's date into an event window (see `TimeConfig::WindowList`).
//!
//! Recognised (first match in this order, case-insensitive): `<n> days|weeks|months|years ago`
//! (`<n>` a number, `a`, `one` to `ten`, `a few`, `a couple of`), `yesterday`, `last <weekday>`,
//! `last|past|this past weekend`, `last|past week`, `last|past month`, `this month`, `this
//! year`, `last year`, `last|past <n> days|weeks|months`, `in <month name>`. Dates are taken in
//! the reference time's own UTC offset. Anything else ("before the wedding") is not resolved.

use chrono::{DateTime, Datelike, Days, FixedOffset, Months, NaiveDate, NaiveTime, TimeZone};
use evicortex_core::EventTime;
use serde::{Deserialize, Serialize};

/// A time expression of the question and the window it resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedTime {
    /// The expression as found in the question (lowercased).
    pub expression: String,
    /// What it was resolved against: the as-of time, else the latest admitted turn's time.
    pub reference: EventTime,
    /// Start of the event window (midnight, reference offset).
    pub start: EventTime,
    /// End of the event window, exclusive.
    pub end: EventTime,
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const WEEKDAYS: [&str; 7] =
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

impl ResolvedTime {
    /// The end of the time-window list, exclusive (UTC microseconds): the end of the reference's
    /// day, since what is said about an event comes after it, up to the question.
    pub fn list_end_micros(&self) -> i64 {
        let now = self.reference.as_datetime();
        now.date_naive()
            .checked_add_days(days(1))
            .and_then(|d| now.offset().from_local_datetime(&d.and_time(NaiveTime::MIN)).single())
            .map_or(i64::MAX, |t| t.timestamp_micros())
    }
}

/// The first time expression of `question` resolved against `reference`, or `None`.
pub fn resolve_time(question: &str, reference: EventTime) -> Option<ResolvedTime> {
    let words: Vec<String> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let now = reference.as_datetime();
    let today = now.date_naive();
    let (expression, start, end) = find(&words, today)?;
    let at = |date: NaiveDate| -> Option<EventTime> {
        let local = now.offset().from_local_datetime(&date.and_time(NaiveTime::MIN)).single()?;
        event_time(local)
    };
    Some(ResolvedTime { expression, reference, start: at(start)?, end: at(end)? })
}

fn event_time(t: DateTime<FixedOffset>) -> Option<EventTime> {
    EventTime::from_parts(t.timestamp_micros(), t.offset().local_minus_utc()).ok()
}

fn days(n: u64) -> Days {
    Days::new(n)
}

fn number(words: &[String], at: usize) -> Option<(u64, usize)> {
    let w = words.get(at)?.as_str();
    let simple = match w {
        "a" | "an" | "one" => Some(1),
        "two" => Some(2),
        "three" => Some(3),
        "four" => Some(4),
        "five" => Some(5),
        "six" => Some(6),
        "seven" => Some(7),
        "eight" => Some(8),
        "nine" => Some(9),
        "ten" => Some(10),
        _ => w.parse::<u64>().ok().filter(|&n| (1..=100).contains(&n)),
    };
    match (w, words.get(at + 1).map(String::as_str)) {
        ("a", Some("few")) => Some((3, 2)),
        ("a", Some("couple")) if words.get(at + 2).is_some_and(|w| w == "of") => Some((2, 3)),
        ("few", _) => Some((3, 1)),
        _ => simple.map(|n| (n, 1)),
    }
}

fn unit_days(word: &str) -> Option<u64> {
    match word.strip_suffix('s').unwrap_or(word) {
        "day" => Some(1),
        "week" => Some(7),
        "month" => Some(30),
        "year" => Some(365),
        _ => None,
    }
}

fn first_of_month(date: NaiveDate) -> NaiveDate {
    date.with_day(1).expect("day 1 exists")
}

type Found = (String, NaiveDate, NaiveDate);

fn find(words: &[String], today: NaiveDate) -> Option<Found> {
    let tomorrow = today.checked_add_days(days(1))?;
    let phrase = |from: usize, len: usize| words[from..from + len].join(" ");
    let is = |i: usize, w: &str| words.get(i).is_some_and(|x| x == w);
    // "<n> <unit>s ago"
    for i in 0..words.len() {
        if let Some((n, len)) = number(words, i)
            && let Some(unit) = words.get(i + len).and_then(|u| unit_days(u))
            && is(i + len + 1, "ago")
        {
            let span = n * unit;
            let centre = today.checked_sub_days(days(span))?;
            let slack = if unit > 1 { (span / 4).max(1) } else { 1 };
            return Some((
                phrase(i, len + 2),
                centre.checked_sub_days(days(slack))?,
                centre.checked_add_days(days(slack + 1))?,
            ));
        }
    }
    if let Some(i) = words.iter().position(|w| w == "yesterday") {
        return Some((phrase(i, 1), today.checked_sub_days(days(1))?, tomorrow));
    }
    for i in 0..words.len().saturating_sub(1) {
        let last = matches!(words[i].as_str(), "last" | "past");
        if !last {
            continue;
        }
        let next = words[i + 1].as_str();
        if let Some(day) = WEEKDAYS.iter().position(|d| *d == next) {
            let back = (today.weekday().num_days_from_monday() as i64 - day as i64).rem_euclid(7);
            let back = if back == 0 { 7 } else { back as u64 };
            let date = today.checked_sub_days(days(back))?;
            return Some((phrase(i, 2), date, date.checked_add_days(days(3))?));
        }
        match next {
            "weekend" => {
                let back = (today.weekday().num_days_from_monday() as i64 - 5).rem_euclid(7);
                let back = if back == 0 { 7 } else { back as u64 };
                let saturday = today.checked_sub_days(days(back))?;
                return Some((phrase(i, 2), saturday, saturday.checked_add_days(days(3))?));
            }
            "week" => {
                return Some((phrase(i, 2), today.checked_sub_days(days(14))?, tomorrow));
            }
            "month" => {
                let this = first_of_month(today);
                let previous = this.checked_sub_months(Months::new(1))?;
                return Some((phrase(i, 2), previous, this.checked_add_days(days(7))?));
            }
            "year" if words[i] == "last" => {
                let this = NaiveDate::from_ymd_opt(today.year(), 1, 1)?;
                let previous = NaiveDate::from_ymd_opt(today.year() - 1, 1, 1)?;
                return Some((phrase(i, 2), previous, this.checked_add_days(days(31))?));
            }
            _ => {}
        }
        if let Some((n, len)) = number(words, i + 1)
            && let Some(unit) = words.get(i + 1 + len).and_then(|u| unit_days(u))
        {
            let back = n * if unit == 30 { 31 } else { unit };
            return Some((phrase(i, len + 2), today.checked_sub_days(days(back))?, tomorrow));
        }
    }
    for i in 0..words.len().saturating_sub(1) {
        if words[i] == "this" {
            match words[i + 1].as_str() {
                "month" => return Some((phrase(i, 2), first_of_month(today), tomorrow)),
                "year" => {
                    let start = NaiveDate::from_ymd_opt(today.year(), 1, 1)?;
                    return Some((phrase(i, 2), start, tomorrow));
                }
                _ => {}
            }
        }
        if words[i] == "in"
            && let Some(m) = MONTHS.iter().position(|m| *m == words[i + 1])
        {
            let month = m as u32 + 1;
            let year = if month <= today.month() { today.year() } else { today.year() - 1 };
            let start = NaiveDate::from_ymd_opt(year, month, 1)?;
            return Some((phrase(i, 2), start, start.checked_add_months(Months::new(1))?));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(question: &str) -> Option<(String, String, String)> {
        // A Wednesday.
        let reference = EventTime::parse_rfc3339("2023-05-17T15:00:00+02:00").unwrap();
        resolve_time(question, reference).map(|r| {
            assert_eq!(r.reference, reference);
            (r.expression, r.start.to_rfc3339(), r.end.to_rfc3339())
        })
    }

    fn expect(question: &str, expression: &str, start: &str, end: &str) {
        assert_eq!(
            window(question),
            Some((
                expression.to_owned(),
                format!("{start}T00:00:00+02:00"),
                format!("{end}T00:00:00+02:00")
            )),
            "{question}"
        );
    }

    #[test]
    fn relative_expressions_resolve_against_the_reference_date() {
        expect("What did I buy two weeks ago?", "two weeks ago", "2023-04-30", "2023-05-07");
        expect("What did I eat 3 days ago?", "3 days ago", "2023-05-13", "2023-05-16");
        let couple = "a couple of months ago";
        expect("Where did I go a couple of months ago?", couple, "2023-03-03", "2023-04-03");
        expect("Who called yesterday?", "yesterday", "2023-05-16", "2023-05-18");
        expect("What did I do last Saturday?", "last saturday", "2023-05-13", "2023-05-16");
        expect("What did I do last Wednesday?", "last wednesday", "2023-05-10", "2023-05-13");
        expect("Where was I last weekend?", "last weekend", "2023-05-13", "2023-05-16");
        expect("What did I read last week?", "last week", "2023-05-03", "2023-05-18");
        expect("What did I read last month?", "last month", "2023-04-01", "2023-05-08");
        expect("How many books this year?", "this year", "2023-01-01", "2023-05-18");
        expect("What did I do in the past 3 months?", "past 3 months", "2023-02-13", "2023-05-18");
    }

    #[test]
    fn month_names_take_the_latest_such_month_up_to_the_reference() {
        expect("What did I plant in March?", "in march", "2023-03-01", "2023-04-01");
        expect("What did I plant in May?", "in may", "2023-05-01", "2023-06-01");
        expect("What did I plant in September?", "in september", "2022-09-01", "2022-10-01");
    }

    #[test]
    fn unresolved_questions_have_no_window() {
        assert_eq!(window("What did I do before the wedding?"), None);
        assert_eq!(window("Which book did Melanie read?"), None);
        assert_eq!(window("How many days did the trip last?"), None);
    }
}
