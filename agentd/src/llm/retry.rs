//! The retry policy shared by every provider: exponential backoff with jitter, honouring the
//! server's requested delay, for a bounded number of attempts.

use std::time::Duration;

/// When and how often to retry.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub initial_delay: Duration,
    /// Upper bound on any computed delay.
    pub max_delay: Duration,
    /// Upper bound on a server-requested delay; longer requests are not waited out.
    pub max_server_delay: Duration,
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
    /// The delay after failed attempt `attempt` (1-based): the server's if it asked, else
    /// `initial * 2^(attempt-1)` capped, with ±25% jitter so that many sessions do not retry in
    /// step.
    pub fn delay(&self, attempt: u32, server: Option<Duration>) -> Duration {
        if let Some(d) = server {
            return d.min(self.max_server_delay);
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
    fn server_delay_wins_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(999))),
            Duration::from_secs(120)
        );
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
