//! Busy loops on every CPU: one thread per online CPU, each pinned to its CPU and spinning
//! until the guard is dropped: a host whose CPUs are saturated by construction.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The running loops; dropping the guard stops and joins them.
pub struct BusyLoops {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Thread id and CPU of each loop.
    pub loops: Vec<(i32, usize)>,
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

impl BusyLoops {
    /// Starts one spinning thread pinned to each CPU this process may use.
    pub fn on_every_cpu() -> BusyLoops {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut loops = Vec::new();
        for cpu in allowed_cpus() {
            let stop = stop.clone();
            let tid = Arc::new(AtomicI32::new(0));
            let tid2 = tid.clone();
            threads.push(std::thread::spawn(move || {
                // SAFETY: as above; pins this thread to `cpu`.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                    tid2.store(libc::gettid(), Ordering::SeqCst);
                }
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
            }));
            while tid.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            loops.push((tid.load(Ordering::SeqCst), cpu));
        }
        BusyLoops {
            stop,
            threads,
            loops,
        }
    }

    /// Time each loop has spent on a CPU so far (/proc/self/task/TID/schedstat).
    pub fn cpu_times(&self) -> Vec<Duration> {
        self.loops
            .iter()
            .map(|(tid, _)| {
                let s =
                    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
                Duration::from_nanos(s.split_whitespace().next().unwrap().parse().unwrap())
            })
            .collect()
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Idle and total jiffies of CPUs `cpus`, from /proc/stat (idle + iowait count as idle).
pub fn cpu_idle_total(cpus: &[usize]) -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let (mut idle, mut total) = (0, 0);
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(cpu) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.contains(&cpu) {
            continue;
        }
        let v: Vec<u64> = f.map(|x| x.parse().unwrap()).collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user)
        idle += v[3] + v[4];
        total += v[..8].iter().sum::<u64>();
    }
    (idle, total)
}
