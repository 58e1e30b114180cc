//! Lowering the scheduling priority of bulk-embedding threads, so that a process that embeds in
//! the background (the server's embedder) leaves the CPU to the requests it answers.
//!
//! Linux keeps a nice value per thread, so one thread can step back without slowing the rest of
//! its process. Elsewhere nice values are per process and this is a no-op.

/// The nice value of bulk-embedding threads: the lowest priority short of idle scheduling, so
/// that a backlog still drains on a busy machine (slowly), and at full speed on an idle one.
pub const BACKGROUND_NICE: i32 = 19;

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`]. An unprivileged thread may lower
/// its priority but never raise it again, so this is for threads that only ever do bulk work.
pub fn lower_current_thread_priority() -> std::io::Result<()> {
    imp::lower_current_thread_priority()
}

#[cfg(target_os = "linux")]
mod imp {
    #[allow(unsafe_code)]
    pub(super) fn lower_current_thread_priority() -> std::io::Result<()> {
        // SAFETY: setpriority takes plain integers; `who` 0 is the calling thread on Linux.
        let status = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, super::BACKGROUND_NICE) };
        if status == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn lower_current_thread_priority() -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice_of_thread(tid: libc::pid_t) -> i32 {
        let stat = fs_err::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        fields[16].parse().unwrap()
    }

    #[allow(unsafe_code)]
    fn gettid() -> libc::pid_t {
        // SAFETY: gettid has no arguments and cannot fail.
        unsafe { libc::gettid() }
    }

    #[test]
    fn only_the_calling_thread_steps_back() {
        let main = gettid();
        let before = nice_of_thread(main);
        let worker = std::thread::spawn(|| {
            lower_current_thread_priority().unwrap();
            nice_of_thread(gettid())
        })
        .join()
        .unwrap();
        assert_eq!(worker, BACKGROUND_NICE);
        assert_eq!(nice_of_thread(main), before, "the rest of the process keeps its priority");
    }
}
