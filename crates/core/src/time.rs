//! Event time: when a turn was said, as an instant plus the offset it was reported in.

use chrono::{DateTime, FixedOffset, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// When a turn was said. Stored as a UTC instant with the original UTC offset kept, so that
/// ordering and as-of filters use the instant while exports reproduce what the source said.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventTime(DateTime<FixedOffset>);

/// Why a text was refused as an event time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeError {
    /// Not RFC 3339, or RFC 3339 without an explicit offset.
    #[error(
        "{given:?} is not an RFC 3339 time with an explicit offset (e.g. 2024-05-02T10:00:00+01:00): {reason}"
    )]
    NotRfc3339 {
        /// The text that was given.
        given: String,
        /// The parser's complaint.
        reason: String,
    },
    /// An offset or instant outside what is representable.
    #[error("time out of range: {detail}")]
    OutOfRange {
        /// What was out of range.
        detail: String,
    },
}

impl EventTime {
    /// Parses RFC 3339 with an explicit offset (`Z` or `+hh:mm`). A time without an offset is
    /// refused rather than guessed.
    pub fn parse_rfc3339(raw: &str) -> Result<EventTime, TimeError> {
        DateTime::parse_from_rfc3339(raw)
            .map(EventTime)
            .map_err(|e| TimeError::NotRfc3339 { given: raw.to_owned(), reason: e.to_string() })
    }

    /// Builds a time from a UTC instant in microseconds and an offset in seconds east of UTC.
    pub fn from_parts(utc_micros: i64, offset_seconds: i32) -> Result<EventTime, TimeError> {
        let offset = FixedOffset::east_opt(offset_seconds).ok_or_else(|| {
            TimeError::OutOfRange { detail: format!("offset {offset_seconds} s") }
        })?;
        let utc = DateTime::<Utc>::from_timestamp_micros(utc_micros)
            .ok_or_else(|| TimeError::OutOfRange { detail: format!("instant {utc_micros} µs") })?;
        Ok(EventTime(utc.with_timezone(&offset)))
    }

    /// The instant in microseconds since the Unix epoch, UTC.
    pub fn utc_micros(self) -> i64 {
        self.0.timestamp_micros()
    }

    /// The original offset in seconds east of UTC.
    pub fn offset_seconds(self) -> i32 {
        self.0.offset().local_minus_utc()
    }

    /// RFC 3339 in the original offset, with as many fractional digits as needed.
    pub fn to_rfc3339(self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    /// The calendar date in the original offset, `YYYY-MM-DD`.
    pub fn local_date(self) -> String {
        use chrono::Datelike;
        // Written directly: packing renders a date for every turn of every block it counts, and
        // `format` parses its pattern each time. Years past four digits keep chrono's sign.
        let date = self.0.date_naive();
        if (0..=9999).contains(&date.year()) {
            format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
        } else {
            self.0.format("%Y-%m-%d").to_string()
        }
    }

    /// The underlying chrono value.
    pub fn as_datetime(self) -> DateTime<FixedOffset> {
        self.0
    }
}

impl From<DateTime<FixedOffset>> for EventTime {
    fn from(dt: DateTime<FixedOffset>) -> EventTime {
        EventTime(dt)
    }
}

// Ordering is by instant; two times naming the same instant in different offsets compare equal in
// order but stay distinct values, so `Ord` is on the (instant, offset) pair to stay consistent
// with `Eq`.
impl PartialOrd for EventTime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EventTime {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.utc_micros(), self.offset_seconds())
            .cmp(&(other.utc_micros(), other.offset_seconds()))
    }
}

impl std::fmt::Display for EventTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for EventTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for EventTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        EventTime::parse_rfc3339(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_offset_and_orders_by_instant() {
        let a = EventTime::parse_rfc3339("2024-05-02T10:00:00+02:00").unwrap();
        let b = EventTime::parse_rfc3339("2024-05-02T09:30:00Z").unwrap();
        assert_eq!(a.offset_seconds(), 7200);
        assert_eq!(a.to_rfc3339(), "2024-05-02T10:00:00+02:00");
        assert!(a < b);
        let back = EventTime::from_parts(a.utc_micros(), a.offset_seconds()).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn local_dates_read_as_chrono_writes_them() {
        // From year 1 BCE to past 9999, on both sides of the offset's midnight.
        for micros in
            [-62_200_000_000_000_000i64, -1, 0, 1_714_600_000_000_000, 253_402_300_800_000_000]
        {
            for offset in [-36_000, 0, 50_400] {
                let t = EventTime::from_parts(micros, offset).unwrap();
                assert_eq!(t.local_date(), t.as_datetime().format("%Y-%m-%d").to_string());
            }
        }
    }

    #[test]
    fn refuses_time_without_offset() {
        assert!(matches!(
            EventTime::parse_rfc3339("2024-05-02T10:00:00"),
            Err(TimeError::NotRfc3339 { .. })
        ));
    }

    #[test]
    fn keeps_subsecond_precision() {
        let t = EventTime::parse_rfc3339("2024-05-02T10:00:00.123456-07:30").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-05-02T10:00:00.123456-07:30");
    }
}
