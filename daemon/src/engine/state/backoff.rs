//! Retry delays: exponential with jitter.

use std::time::Duration;

use orch_protocol::Backoff;

/// The delay before `next_attempt`: the nominal exponential delay scaled by a random
/// factor between 0.5 and 1.0, so that tasks failing together do not retry together.
pub fn retry_delay(backoff: &Backoff, next_attempt: u32) -> Duration {
    let nominal = backoff.nominal_delay_ms(next_attempt);
    let jittered = nominal / 2 + fastrand::u64(0..=nominal - nominal / 2);
    Duration::from_millis(jittered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_within_jitter_and_cap() {
        let backoff = Backoff {
            initial_ms: 100,
            max_ms: 1_000,
        };
        for _ in 0..100 {
            let d2 = retry_delay(&backoff, 2).as_millis();
            let d3 = retry_delay(&backoff, 3).as_millis();
            let d9 = retry_delay(&backoff, 9).as_millis();
            assert!((50..=100).contains(&d2), "{d2}");
            assert!((100..=200).contains(&d3), "{d3}");
            assert!((500..=1_000).contains(&d9), "{d9}");
        }
    }

    #[test]
    fn zero_backoff_retries_at_once() {
        let backoff = Backoff {
            initial_ms: 0,
            max_ms: 0,
        };
        assert_eq!(retry_delay(&backoff, 5), Duration::ZERO);
    }
}
