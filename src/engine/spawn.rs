//! Starting a task's process cheaply, tied to vitgraph's life.
//!
//! A task must die with vitgraph, even with a `kill -9` (`PR_SET_PDEATHSIG`),
//! and lead its own process group (SIGINT terminates the group). The standard
//! library can only set the first in a `pre_exec` hook, and a hook makes it
//! `fork` the whole process: the kernel then copies vitgraph's page tables and
//! write-protects its heap for every task. On a 10,000-node graph that cost
//! 5 ms per task, more than the tasks themselves. So tasks start here the way
//! `posix_spawn` starts them — a child that shares vitgraph's memory
//! (`CLONE_VM | CLONE_VFORK`) and only makes system calls on data prepared in
//! advance before it `execve`s — with the death signal set in between.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

/// One process to start: program, arguments, environment, directory, and the
/// files its stdin, stdout and stderr are.
pub(crate) struct Spawn {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Set on top of vitgraph's own environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The cores the process (and every thread it starts) may run on;
    /// None: vitgraph's own.
    pub cores: Option<Vec<usize>>,
    /// A file (opened for appending) where the process notes its own group
    /// as `<pid> <start time>` before it execs, so that no moment exists
    /// when it runs unnoted (see `store::TaskGroups`).
    pub note_group: Option<libc::c_int>,
}

/// What the child reads; everything is ready before it exists.
struct ChildArgs {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    fds: [libc::c_int; 3],
    parent: libc::pid_t,
    /// The affinity mask to take before `execve`.
    cores: Option<libc::cpu_set_t>,
    /// Where to note the child's group before `execve` (-1: nowhere).
    note_group: libc::c_int,
    /// The child's `errno` when something before `execve` failed (0: none).
    error: AtomicI32,
}

/// Where a program name is found: a name with a `/` as it is, others on `PATH`.
pub(crate) fn find_program(program: &OsStr) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("`{}` was not found on PATH", program.to_string_lossy()),
    ))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path we own.
    let ok = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
    ok && path.is_file()
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` contains a NUL byte", s.to_string_lossy()),
        )
    })
}

/// The child's side, between `clone` and `execve`: only system calls on the
/// prepared data, no allocation, no locks (it runs on vitgraph's memory while
/// vitgraph's thread waits).
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` that `spawn` keeps alive until the
    // child has exec'd or exited (CLONE_VFORK suspends the caller until then).
    let a = unsafe { &*(arg as *const ChildArgs) };
    let fail = |a: &ChildArgs| -> ! {
        a.error.store(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
            Ordering::SeqCst,
        );
        // SAFETY: _exit(2) ends the child without running any of vitgraph's handlers.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: plain system calls on values prepared by the parent.
    unsafe {
        // The parent's signal handlers must not run here: reset every handled
        // signal to its default (this child has its own handler table).
        for sig in 1..65 {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        if libc::setpgid(0, 0) != 0 {
            fail(a);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(a);
        }
        // vitgraph died before the death signal was armed: die now.
        if libc::getppid() != a.parent {
            libc::_exit(127);
        }
        if a.note_group >= 0 {
            note_own_group(a.note_group);
        }
        for (target, &fd) in a.fds.iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) < 0 {
                fail(a);
            }
        }
        if libc::chdir(a.cwd.as_ptr()) != 0 {
            fail(a);
        }
        if let Some(set) = &a.cores {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                fail(a);
            }
        }
        // The program starts with no signal blocked.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(a.path.as_ptr(), a.argv.as_ptr(), a.envp.as_ptr());
    }
    fail(a)
}

/// Appends `<pid> <start time>\n` for the calling process to `fd` in one
/// write, the start time read from `/proc/self/stat` as `store::owner`
/// reads it. Runs in the child between `clone` and `execve`: stack buffers
/// and system calls only, nothing that allocates or can panic; on any
/// failure it notes nothing (the parent's kill on interrupt still reaches
/// the group).
fn note_own_group(fd: libc::c_int) {
    let mut stat = [0u8; 1024];
    // SAFETY: open/read/close on a NUL-terminated path and a buffer we own.
    let n = unsafe {
        let stat_fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if stat_fd < 0 {
            return;
        }
        let n = libc::read(stat_fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(stat_fd);
        n
    };
    let Some(text) = usize::try_from(n).ok().and_then(|n| stat.get(..n)) else {
        return;
    };
    let Some(start) = start_time_of_stat(text) else {
        return;
    };
    // SAFETY: getpid(2) cannot fail.
    let pid = unsafe { libc::getpid() };
    let mut line = [0u8; 48];
    let mut len = put_decimal(&mut line, 0, pid as u64);
    if let Some(b) = line.get_mut(len) {
        *b = b' ';
        len += 1;
    }
    len = put_decimal(&mut line, len, start);
    if let Some(b) = line.get_mut(len) {
        *b = b'\n';
        len += 1;
    }
    // SAFETY: write(2) of `len` initialized bytes of `line`.
    unsafe {
        libc::write(fd, line.as_ptr().cast(), len);
    }
}

/// Field 22 of a `/proc/<pid>/stat` line (the start time), counting fields
/// after the last `)`; None when it is not there. Allocation-free.
fn start_time_of_stat(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = stat.get(close + 1..)?;
    // `state` is field 3, the first after `)`: the start time is the 20th.
    let field = rest
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(19)?;
    let mut value: u64 = 0;
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(value)
}

/// Writes `v` in decimal into `buf` from `at`; the position after it (digits
/// that do not fit are left out).
fn put_decimal(buf: &mut [u8], at: usize, mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        if let Some(d) = digits.get_mut(n) {
            *d = b'0' + (v % 10) as u8;
        }
        n += 1;
        v /= 10;
        if v == 0 || n == digits.len() {
            break;
        }
    }
    let mut at = at;
    while n > 0 {
        n -= 1;
        if let (Some(slot), Some(&d)) = (buf.get_mut(at), digits.get(n)) {
            *slot = d;
            at += 1;
        }
    }
    at
}

/// A CPU set of `cores` (those beyond `CPU_SETSIZE` left out).
fn cpu_set(cores: &[usize]) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it
    // for indices below CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Starts the process; returns its pid (it leads its own process group).
pub(crate) fn spawn(s: &Spawn) -> io::Result<libc::pid_t> {
    let path = find_program(&s.program)?;
    let path = cstring(path.as_os_str())?;
    let mut args = vec![cstring(&s.program)?];
    for a in &s.args {
        args.push(cstring(a)?);
    }
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !s.env.iter().any(|(sk, _)| sk == k))
        .collect();
    env.extend(s.env.iter().cloned());
    let env: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<io::Result<_>>()?;
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let child = ChildArgs {
        path,
        argv,
        envp,
        cwd: cstring(s.cwd.as_os_str())?,
        fds: [
            s.stdin.as_raw_fd(),
            s.stdout.as_raw_fd(),
            s.stderr.as_raw_fd(),
        ],
        // SAFETY: getpid(2) cannot fail.
        parent: unsafe { libc::getpid() },
        cores: s.cores.as_deref().map(cpu_set),
        note_group: s.note_group.unwrap_or(-1),
        error: AtomicI32::new(0),
    };
    // The child runs on this stack until it execs; 64 KiB is plenty for
    // the system calls above.
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the stack grows down from its (16-byte aligned) end.
    let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
    let top = ((top as usize) & !15) as *mut libc::c_void;
    // Block every signal while the child shares our memory, so no handler of
    // ours runs on its stack; the child unblocks them before it execs.
    // SAFETY: sigset manipulation and clone(2) with CLONE_VFORK: this thread
    // waits until the child has exec'd or exited, so `child` and `stack` outlive
    // every use the child makes of them.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &child as *const ChildArgs as *mut libc::c_void,
        );
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    let errno = child.error.load(Ordering::SeqCst);
    if errno != 0 {
        // The child exited before exec: reap it and report why.
        let _ = wait(pid);
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(pid)
}

/// Waits for `pid` to end (blocking); its wait status.
pub(crate) fn wait(pid: libc::pid_t) -> io::Result<libc::c_int> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Waits for `pid`, the leader of its own process group, to end; then kills
/// what is left of its group (processes the task started and left running,
/// which could otherwise go on writing into its outputs) before the leader
/// is reaped, so the group's id cannot have been reused meanwhile. Returns
/// the leader's wait status.
pub(crate) fn wait_and_end_group(pid: libc::pid_t) -> io::Result<libc::c_int> {
    loop {
        // SAFETY: waitid(2) for our own child into a zeroed siginfo_t;
        // WNOWAIT leaves it a zombie, which keeps its pid (and group id) taken.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // SAFETY: kill(2) with a negative pid signals the process group; ESRCH
    // when nothing is left in it but the zombie leader is fine.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    wait(pid)
}

/// Opens `/dev/null` for a child's stdin.
pub(crate) fn dev_null() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/dev/null")?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `program args` in `cwd` with `env` added; stdout and stderr go
    /// to `dir/out.txt`.
    fn start(
        dir: &Path,
        cwd: &Path,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> io::Result<libc::pid_t> {
        let out = std::fs::File::create(dir.join("out.txt")).unwrap();
        let err = out.try_clone().unwrap();
        spawn(&Spawn {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            cwd: cwd.to_path_buf(),
            stdin: dev_null().unwrap(),
            stdout: out.into(),
            stderr: err.into(),
            cores: None,
            note_group: None,
        })
    }

    #[test]
    fn runs_a_program_with_its_environment_directory_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let script = "echo \"$VG_TEST_VAR $(pwd)\"; read x; echo \"read=$?\"; exit 3";
        let pid = start(
            dir.path(),
            dir.path(),
            "sh",
            &["-c", script],
            &[("VG_TEST_VAR", "hello")],
        )
        .unwrap();
        let status = wait(pid).unwrap();
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 3);
        let text = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(text, format!("hello {}\nread=1\n", cwd.display()));
    }

    #[test]
    fn a_child_notes_its_own_group_before_it_runs_the_program() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let notes = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("groups"))
            .unwrap();
        let out = std::fs::File::create(dir.path().join("out.txt")).unwrap();
        let err = out.try_clone().unwrap();
        // The program reads the line back: it was there before it ran.
        let pid = spawn(&Spawn {
            program: "sh".into(),
            args: vec!["-c".into(), "cat groups; read x".into()],
            env: Vec::new(),
            cwd: dir.path().to_path_buf(),
            stdin: dev_null().unwrap(),
            stdout: out.into(),
            stderr: err.into(),
            cores: None,
            note_group: Some(notes.as_raw_fd()),
        })
        .unwrap();
        let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
        let start = start_time_of_stat(&stat).unwrap();
        wait(pid).unwrap();
        let seen = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
        assert_eq!(seen, format!("{pid} {start}\n"));
    }

    #[test]
    fn the_start_time_is_field_22_whatever_the_command_name_holds() {
        let mut fields: Vec<String> = (3..=30).map(|i| i.to_string()).collect();
        fields[0] = "S".into();
        fields[22 - 3] = "18446744073709551615".into();
        let line = format!("42 (a) b (c)) {}\n", fields.join(" "));
        assert_eq!(start_time_of_stat(line.as_bytes()), Some(u64::MAX));
        assert_eq!(start_time_of_stat(b"42 (sh) S 1 2"), None);
        let mut buf = [0u8; 8];
        assert_eq!(put_decimal(&mut buf, 1, 907), 4);
        assert_eq!(&buf[1..4], b"907");
        assert_eq!(put_decimal(&mut buf, 0, 0), 1);
        assert_eq!(
            put_decimal(&mut buf, 5, 123_456),
            8,
            "digits past the end left out"
        );
    }

    #[test]
    fn a_pinned_child_runs_on_its_cores_only() {
        let dir = tempfile::tempdir().unwrap();
        let out = std::fs::File::create(dir.path().join("out.txt")).unwrap();
        let err = out.try_clone().unwrap();
        let last = crate::telemetry::host::affinity()
            .and_then(|c| c.last().copied())
            .expect("this process runs on some core");
        let pid = spawn(&Spawn {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                "grep Cpus_allowed_list /proc/self/status".into(),
            ],
            env: Vec::new(),
            cwd: dir.path().to_path_buf(),
            stdin: dev_null().unwrap(),
            stdout: out.into(),
            stderr: err.into(),
            cores: Some(vec![last]),
            note_group: None,
        })
        .unwrap();
        wait(pid).unwrap();
        let text = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
        assert_eq!(
            text.split_whitespace().last(),
            Some(last.to_string().as_str()),
            "{text}"
        );
    }

    #[test]
    fn the_child_leads_its_own_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid = start(
            dir.path(),
            dir.path(),
            "sh",
            &["-c", "ps -o pgid= -p $$"],
            &[],
        )
        .unwrap();
        wait(pid).unwrap();
        let text = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
        assert_eq!(text.trim(), pid.to_string());
    }

    #[test]
    fn what_a_task_leaves_running_in_its_group_is_ended_with_it() {
        let dir = tempfile::tempdir().unwrap();
        // The task starts a writer in the background and exits at once.
        let script = "(while true; do echo late >> bg.txt; sleep 0.01; done) & echo $! > bg.pid";
        let pid = start(dir.path(), dir.path(), "sh", &["-c", script], &[]).unwrap();
        let status = wait_and_end_group(pid).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        let bg: i32 = std::fs::read_to_string(dir.path().join("bg.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SIGKILL is delivered, not awaited: wait (bounded) until the writer
        // is a zombie or gone. It never gets to write again either way.
        let state = || {
            std::fs::read_to_string(format!("/proc/{bg}/stat"))
                .ok()
                .and_then(|s| Some(s.rsplit(')').next()?.split_whitespace().next()?.to_string()))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while matches!(state().as_deref(), Some(s) if s != "Z" && s != "X")
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            matches!(state().as_deref(), None | Some("Z") | Some("X")),
            "the background writer still runs: {:?}",
            state()
        );
    }

    #[test]
    fn a_missing_program_or_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = start(dir.path(), dir.path(), "vitgraph-no-such-program", &[], &[]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = start(dir.path(), &dir.path().join("missing"), "sh", &[], &[]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }
}
