//! The retry policy: at most 2 retries of a retryable error that came before any output,
//! waiting base·2^(attempt−1) with ±25% jitter, or what `retry-after` asks (capped).

use std::time::Duration;

pub const MAX_RETRIES: u32 = 2;
pub const BASE: Duration = Duration::from_secs(1);
/// The longest wait a `retry-after` header may impose.
pub const CAP: Duration = Duration::from_secs(60);

/// How long to wait before retry number `attempt` (1-based).
pub fn delay(attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(asked) = retry_after {
        return asked.min(CAP);
    }
    let exp = BASE * 2u32.pow(attempt.saturating_sub(1).min(10));
    let jitter = 0.75 + fastrand::f64() * 0.5;
    exp.mul_f64(jitter).min(CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_with_jitter_and_retry_after_capped() {
        for _ in 0..100 {
            let d1 = delay(1, None).as_secs_f64();
            let d2 = delay(2, None).as_secs_f64();
            assert!((0.75..=1.25).contains(&d1), "{d1}");
            assert!((1.5..=2.5).contains(&d2), "{d2}");
        }
        assert_eq!(
            delay(1, Some(Duration::from_millis(300))),
            Duration::from_millis(300)
        );
        assert_eq!(delay(1, Some(Duration::from_secs(3600))), CAP);
    }
}
