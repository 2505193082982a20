//! Times as the pod pages show them: `T+` offsets from a pod's creation, the gap between two
//! steps and the wall clock, written out by hand to keep chrono's formatter out of the bundle.

use shared::model::Time;

/// Milliseconds from `from` to `to`.
pub fn millis_between(from: Time, to: Time) -> i64 {
    (to - from).num_milliseconds()
}

/// `T+3600ms`, the seed's notation; seconds past ten seconds, minutes past ten minutes.
pub fn t_plus(ms: i64) -> String {
    if ms < 0 {
        return format!("T{ms}ms");
    }
    if ms < 10_000 {
        format!("T+{ms}ms")
    } else if ms < 600_000 {
        format!("T+{}s", one_decimal((ms + 50) / 100))
    } else {
        format!("T+{}m", ms / 60_000)
    }
}

/// `+1.2s`, the gap since the step before.
pub fn delta(ms: i64) -> String {
    if ms.abs() < 1000 { format!("+{ms}ms") } else { format!("+{}s", one_decimal((ms + ms.signum() * 50) / 100)) }
}

/// Tenths as a number with one decimal, `125` → `12.5`: integer arithmetic, since float
/// formatting (`{:.1}`) would bring its own code into the bundle.
pub fn one_decimal(tenths: i64) -> String {
    format!("{}{}.{}", if tenths < 0 { "-" } else { "" }, tenths.abs() / 10, tenths.abs() % 10)
}

/// `06:21:07.123`, UTC: enough to line up with server logs. Written out by hand: chrono's
/// format strings would add their interpreter to the wasm bundle.
pub fn clock(time: Time) -> String {
    use chrono::Timelike;
    format!("{:02}:{:02}:{:02}.{:03}", time.hour(), time.minute(), time.second(), time.timestamp_subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::fixtures::ms;

    #[test]
    fn formats_times_like_the_seed() {
        assert_eq!(t_plus(0), "T+0ms");
        assert_eq!(t_plus(3600), "T+3600ms");
        assert_eq!(t_plus(12_500), "T+12.5s");
        assert_eq!(t_plus(1_200_000), "T+20m");
        assert_eq!(delta(100), "+100ms");
        assert_eq!(delta(2900), "+2.9s");
        assert_eq!(delta(-1_460), "+-1.5s");
        assert_eq!(one_decimal(-5), "-0.5");
        assert_eq!(clock(ms(1234)), "12:00:01.234");
    }
}
