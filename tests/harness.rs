//! The fixtures of the experiments with a known answer (tests/common) prove themselves here:
//! the slow device is slow by the delay and /proc/diskstats says so, the cgroup limit holds,
//! the busy loops leave no CPU idle, and the pg_stat_activity sampler reports the wait events
//! of backends put in known waits, at ≥ 50 Hz.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::busy::{cpu_idle_total, BusyLoops};
use common::iolimit::IoLimit;
use common::pgsampler::{PgSampler, WaitSamplingWindow};
use common::slowdev::{direct_reads, disk_reads, SlowDevice};

#[test]
fn slow_device_reads_take_the_delay_and_diskstats_agree() {
    let delay = Duration::from_millis(2);
    let Some(dev) = SlowDevice::new(delay, 64 << 20) else {
        return;
    };
    // Let udev's probe of the new device pass before counting.
    std::thread::sleep(Duration::from_millis(500));
    let n = 100;
    let (reads0, ms0) = disk_reads(&dev.name);
    let times = direct_reads(&dev.dev, n, 8192, 64 << 20);
    let (reads1, ms1) = disk_reads(&dev.name);
    let min = *times.iter().min().unwrap();
    let mean = times.iter().sum::<Duration>() / n as u32;
    eprintln!(
        "{}: {n} reads of 8 KiB, min {min:?}, mean {mean:?}; diskstats {} reads, {} ms",
        dev.dev,
        reads1 - reads0,
        ms1 - ms0
    );
    // Every read waited for the FUSE daemon's sleep.
    assert!(min >= delay, "a read took {min:?} < {delay:?}");
    // The device saw our reads (and at most a few of udev's), each of them in service for at
    // least the delay and never longer than the syscalls lasted (ms are truncated once).
    let reads = reads1 - reads0;
    assert!(
        (n as u64..=n as u64 + 8).contains(&reads),
        "{reads} reads for {n}"
    );
    let per_read = Duration::from_millis(ms1 - ms0) / reads as u32;
    assert!(
        (ms1 - ms0 + 1) as f64 >= reads as f64 * delay.as_secs_f64() * 1e3,
        "device time {} ms for {reads} reads of ≥ {delay:?}",
        ms1 - ms0
    );
    assert!(
        per_read <= mean + Duration::from_micros(100),
        "device time per read {per_read:?} above the syscalls' mean {mean:?}"
    );
}

/// Wall time of `n` 4 KiB O_DIRECT reads of `dev` by `dd`, in the cgroup of `limit` if given.
fn dd_reads(dev: &str, n: u32, limit: Option<&IoLimit>) -> Duration {
    let mut cmd = Command::new("dd");
    cmd.args([
        &format!("if={dev}"),
        "of=/dev/null",
        "bs=4096",
        &format!("count={n}"),
        "iflag=direct",
        "status=none",
    ]);
    if let Some(l) = limit {
        l.join_on_exec(&mut cmd);
    }
    let t = Instant::now();
    let st = cmd.status().unwrap();
    assert!(st.success(), "dd: {st}");
    t.elapsed()
}

#[test]
fn cgroup_io_limit_holds() {
    if !common::root_or_skip("a cgroup I/O limit on a loop device") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let lo = common::loopdev::Loop::attach(&backing).expect("losetup");
    let dev = lo.dev().to_string();

    let riops = 100;
    let n = 300;
    let free = dd_reads(&dev, n, None);
    let Some(limit) = IoLimit::new(&dev, Some(riops), None) else {
        return;
    };
    let limited = dd_reads(&dev, n, Some(&limit));
    let (free_rate, limited_rate) = (
        n as f64 / free.as_secs_f64(),
        n as f64 / limited.as_secs_f64(),
    );
    eprintln!(
        "{dev}: {n} reads free {free:?} ({free_rate:.0}/s), under riops={riops} (cgroup v{}) \
         {limited:?} ({limited_rate:.0}/s)",
        limit.version
    );
    // The limit holds (blk-throttle lets at most one 100 ms slice's worth through early)...
    assert!(
        limited_rate <= riops as f64 * 1.2,
        "{limited_rate:.0} reads/s under a limit of {riops}"
    );
    // ...and it is what slowed the reads: without it they went much faster.
    assert!(
        free_rate >= 3.0 * riops as f64,
        "without the limit only {free_rate:.0} reads/s: the machine, not the limit, is slow"
    );
}

/// The CPU-sensitive tests (busy loops, the 100 Hz sampler) run one at a time.
static CPU_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn busy_loops_leave_no_cpu_idle() {
    let _serial = CPU_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = common::busy::allowed_cpus();
    let busy = BusyLoops::on_every_cpu();
    assert_eq!(busy.loops.len(), cpus.len());
    let mut pinned: Vec<usize> = busy.loops.iter().map(|l| l.1).collect();
    pinned.sort();
    assert_eq!(pinned, cpus, "one loop per CPU");
    std::thread::sleep(Duration::from_millis(100));
    let (idle0, total0) = cpu_idle_total(&cpus);
    let on0 = busy.cpu_times();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let (idle1, total1) = cpu_idle_total(&cpus);
    let on1 = busy.cpu_times();
    let wall = t.elapsed();
    let idle = (idle1 - idle0) as f64 / (total1 - total0).max(1) as f64;
    eprintln!("{} CPUs: idle {:.1} %", cpus.len(), idle * 100.0);
    // A CPU with a runnable thread is never idle; jiffy sampling leaves a tick or two.
    assert!(
        idle < 0.05,
        "CPUs idle {:.1} % under busy loops",
        idle * 100.0
    );
    for (i, (a, b)) in on0.iter().zip(&on1).enumerate() {
        let share = (*b - *a).as_secs_f64() / wall.as_secs_f64();
        assert!(
            share > 0.1,
            "loop {i} ran {:.0} % of the time",
            share * 100.0
        );
    }
    let tids: Vec<i32> = busy.loops.iter().map(|l| l.0).collect();
    drop(busy);
    for tid in tids {
        assert!(
            !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists(),
            "loop thread {tid} still runs after the guard was dropped"
        );
    }
}

#[test]
fn pg_sampler_reports_known_waits() {
    let _serial = CPU_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dsn) = common::pg_dsn("the pg_stat_activity sampler's test") else {
        return;
    };
    let app = format!("iolens-fx-{}", std::process::id());
    let connect = |name: &str| {
        postgres::Client::connect(&format!("{dsn} application_name={name}"), postgres::NoTls)
            .unwrap()
    };
    let table = format!("iolens_fx_{}", std::process::id());
    let mut admin = connect("iolens-fx-admin");
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, v int); \
             INSERT INTO {table} VALUES (1, 0)"
        ))
        .unwrap();
    // Three backends of `app` in known states: in pg_sleep, waiting on a row lock, on CPU.
    let mut holder = connect("iolens-fx-holder");
    holder
        .batch_execute(&format!("BEGIN; UPDATE {table} SET v = 1 WHERE id = 1"))
        .unwrap();
    let mut sleeper = connect(&app);
    let mut waiter = connect(&app);
    let mut burner = connect(&app);
    let sleeping = std::thread::spawn(move || sleeper.batch_execute("SELECT pg_sleep(4)"));
    let waiting = {
        let q = format!("UPDATE {table} SET v = 2 WHERE id = 1");
        std::thread::spawn(move || waiter.batch_execute(&q))
    };
    let burning = std::thread::spawn(move || {
        burner.batch_execute(
            "SET statement_timeout = '4s'; \
             DO $$DECLARE i bigint := 0; BEGIN LOOP i := i + 1; END LOOP; END$$",
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let sampler = PgSampler::start(&dsn, &app, 100.0);
    let server_side = WaitSamplingWindow::start(&dsn, &app);
    std::thread::sleep(Duration::from_millis(1500));
    let seen = sampler.finish();
    let server_side = server_side.map(WaitSamplingWindow::finish);
    holder.batch_execute("ROLLBACK").unwrap();
    waiting.join().unwrap().unwrap();
    assert!(sleeping.join().unwrap().is_ok());
    assert!(
        burning.join().unwrap().is_err(),
        "the CPU loop ends by its timeout"
    );
    admin.batch_execute(&format!("DROP TABLE {table}")).unwrap();
    eprintln!(
        "{} rounds in {:?} ({:.0} Hz), {} samples: {:?}",
        seen.rounds,
        seen.window,
        seen.rate_hz(),
        seen.samples,
        seen.shares
    );
    assert!(
        seen.rate_hz() >= 50.0,
        "sampled at {:.0} Hz",
        seen.rate_hz()
    );
    // Every round saw the three backends (and none of the others), each in its state.
    assert_eq!(seen.samples, 3 * seen.rounds);
    for label in ["Timeout:PgSleep", "Lock:transactionid", "CPU"] {
        let s = seen.share(label);
        assert!(
            (s - 1.0 / 3.0).abs() < 0.02,
            "{label}: {s:.3} of the samples"
        );
    }
    // pg_wait_sampling, sampling inside the server every 10 ms over the same window, agrees
    // on the waits (Debian's 1.1.4 counts no CPU): about 2 × 150 samples, half each (its
    // window's edges differ from the sampler's by a few samples).
    if let Some(ws) = server_side {
        let waits = seen.waits_only();
        eprintln!("pg_wait_sampling: {} samples: {:?}", ws.samples, ws.shares);
        assert!(
            ws.samples >= 200,
            "pg_wait_sampling: {} samples",
            ws.samples
        );
        for label in ["Timeout:PgSleep", "Lock:transactionid"] {
            let (s, mine) = (ws.share(label), waits.share(label));
            assert!((s - 0.5).abs() < 0.05, "pg_wait_sampling {label}: {s:.3}");
            assert!(
                (s - mine).abs() < 0.05,
                "{label}: pg_wait_sampling {s:.3}, sampler {mine:.3}"
            );
        }
        assert!(ws.share("CPU") == 0.0 || (ws.share("CPU") - 1.0 / 3.0).abs() < 0.05);
    }
}
