//! The retry policy shared by every provider: exponential backoff with jitter, honouring the
//! server's requested delay, for a bounded number of attempts.

use std::time::Duration;

/// When and how often to retry.
#[derive(Debug, Clone)]
pub(crate) struct RetryPolicy {
    /// Attempts in all, the first included.
    pub(crate) max_attempts: u32,
    /// Delay before the first retry.
    pub(crate) initial_delay: Duration,
    /// Upper bound on any computed delay.
    pub(crate) max_delay: Duration,
    /// Longest server-requested delay honoured. A longer request (a misconfigured or hostile
    /// server may ask for `1e30` seconds) is ignored and the computed backoff applies, as the
    /// official Anthropic and OpenAI SDKs do past their own bound.
    pub(crate) max_server_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_server_delay: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The delay after failed attempt `attempt` (1-based): the server's if it asked for at
    /// most `max_server_delay`, else `initial * 2^(attempt-1)` capped, with ±25% jitter so that
    /// many sessions do not retry in step.
    pub(crate) fn delay(&self, attempt: u32, server: Option<Duration>) -> Duration {
        if let Some(d) = server.filter(|d| *d <= self.max_server_delay) {
            return d;
        }
        let base = self
            .initial_delay
            .saturating_mul(1u32 << (attempt - 1).min(16))
            .min(self.max_delay);
        let jitter = 0.75 + rand::random::<f64>() * 0.5;
        base.mul_f64(jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_delay_wins_unless_past_the_bound() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(120))),
            Duration::from_secs(120)
        );
        for huge in [Duration::from_secs(121), Duration::MAX] {
            let d = p.delay(2, Some(huge));
            assert!(
                d >= Duration::from_millis(750) && d <= Duration::from_millis(1250),
                "{huge:?} is ignored for the backoff: {d:?}"
            );
        }
    }

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let p = RetryPolicy::default();
        for attempt in 1..=3 {
            let d = p.delay(attempt, None).as_secs_f64();
            let base = 0.5 * f64::from(1u32 << (attempt - 1));
            assert!(
                d >= base * 0.75 && d <= base * 1.25,
                "attempt {attempt}: {d}"
            );
        }
        assert!(p.delay(30, None) <= Duration::from_secs_f64(37.5));
    }
}
