//! `.timer`: real, user and system time of a statement.

use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};

/// A point in time for the process: wall clock and CPU time so far.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    real: Instant,
    user: Duration,
    sys: Duration,
}

fn duration(t: nix::sys::time::TimeVal) -> Duration {
    let micros = t.tv_sec() as i128 * 1_000_000 + t.tv_usec() as i128;
    Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

impl Stamp {
    pub fn now() -> Stamp {
        let (user, sys) = getrusage(UsageWho::RUSAGE_SELF)
            .map(|u| (duration(u.user_time()), duration(u.system_time())))
            .unwrap_or_default();
        Stamp {
            real: Instant::now(),
            user,
            sys,
        }
    }

    /// `Run Time: real … user … sys …` since this stamp, in seconds.
    pub fn report(&self) -> String {
        let now = Stamp::now();
        format!(
            "Run Time: real {:.6} user {:.6} sys {:.6}",
            now.real.duration_since(self.real).as_secs_f64(),
            now.user.saturating_sub(self.user).as_secs_f64(),
            now.sys.saturating_sub(self.sys).as_secs_f64()
        )
    }
}
