//! At 80 columns no line that `run`, `calibrate`, `show` or `compare` prints is wider than the
//! terminal: tables abbreviate their columns and prose breaks between words, so the terminal
//! never wraps a line in the middle of a figure. Real runs on real temp files.

use std::path::Path;

mod common;
use common::bin;

/// Lines of `text` wider than `width` columns (ANSI colour escapes take no columns).
fn too_wide(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| iolens::out::visible_width(l) > width)
        .map(|l| format!("{} columns: {l}", iolens::out::visible_width(l)))
        .collect()
}

fn ok_stdout(cmd: &mut std::process::Command) -> String {
    let out = cmd.env("COLUMNS", "80").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn assert_fits(what: &str, text: &str) {
    let wide = too_wide(text, 80);
    assert!(
        wide.is_empty(),
        "{what}: lines wider than 80 columns:\n{}\n--- whole output:\n{text}",
        wide.join("\n")
    );
}

fn run(dir: &Path, json: &Path) -> String {
    ok_stdout(
        bin()
            .args("run --size 8M --duration 0.5s --interval 100ms".split(' '))
            .arg("--target")
            .arg(dir.join("s.dat"))
            .arg("--json")
            .arg(json),
    )
}

#[test]
fn run_calibrate_show_and_compare_fit_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (r1, r2, cal) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("cal.json"),
    );
    assert_fits("run", &run(dir.path(), &r1));
    run(dir.path(), &r2);
    let text = ok_stdout(
        bin()
            .args(
                "calibrate --budget 6s --max-sessions 2 --max-qd 1 --phases randread,seqread1 \
                 --size 32M --no-progress"
                    .split_whitespace(),
            )
            .arg("--target")
            .arg(dir.path().join("c.dat"))
            .arg("--json")
            .arg(&cal),
    );
    assert!(text.contains("Load curve"), "{text}");
    assert_fits("calibrate", &text);
    for f in [&r1, &cal] {
        for color in ["never", "always"] {
            let text = ok_stdout(
                bin()
                    .args(["show", "--width", "80", "--color", color])
                    .arg(f),
            );
            assert!(text.contains("Summary"), "{text}");
            assert_fits("show", &text);
        }
    }
    let text = ok_stdout(bin().args(["compare", "--width", "80"]).arg(&r1).arg(&r2));
    assert!(text.contains("ratio"), "{text}");
    assert_fits("compare", &text);
}

/// Lines of the standard output of `args` run with `--width` `w` (and `$COLUMNS` saying
/// otherwise, so that the flag is what decides) that are wider than `w`.
fn wider_than(w: usize, args: &[&str]) -> (String, Vec<String>) {
    let out = bin()
        .args(args)
        .args(["--width", &w.to_string()])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let wide = too_wide(&text, w);
    (text, wide)
}

#[test]
fn width_flag_fits_every_command_that_prints_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (run_json, cal_json, trace_json) = (p("r.json"), p("c.json"), p("t.json"));
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real/js122a1_ora_9854.trc")
        .to_str()
        .unwrap()
        .to_string();
    let bcc = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real/bcc_biolatency_D.txt")
        .to_str()
        .unwrap()
        .to_string();
    let (scratch, cal_target) = (p("s.dat"), p("c.dat"));
    let db = p("db");
    std::fs::create_dir(&db).unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "run",
            "--size",
            "8M",
            "--duration",
            "0.5s",
            "--interval",
            "100ms",
            "--target",
            &scratch,
            "--json",
            &run_json,
        ],
        vec![
            "calibrate",
            "--budget",
            "6s",
            "--max-sessions",
            "2",
            "--max-qd",
            "1",
            "--phases",
            "randread,seqread1",
            "--size",
            "32M",
            "--no-progress",
            "--target",
            &cal_target,
            "--json",
            &cal_json,
        ],
        vec!["verify", "--target", &scratch],
        vec!["trace", &trace, "--json", &trace_json],
        vec!["ingest", "--format", "biolatency", &bcc],
        vec![
            "db",
            "setup",
            "--dir",
            &db,
            "--schemas",
            "1",
            "--scale",
            "8M",
        ],
        vec![
            "db",
            "run",
            "--dir",
            &db,
            "--sessions",
            "1",
            "--duration",
            "1s",
            "--update-pct",
            "20",
        ],
        vec!["show", &run_json, "--color", "always"],
        vec!["show", &cal_json],
        vec!["show", &trace_json],
        vec!["compare", &run_json, &run_json],
    ];
    for w in [80, 60] {
        for args in &commands {
            let (text, wide) = wider_than(w, args);
            assert!(
                wide.is_empty(),
                "{args:?} at --width {w}: lines wider than {w} columns:\n{}\n--- whole output:\n{text}",
                wide.join("\n")
            );
        }
    }
    // The flag is checked: a width no terminal has is refused with a clear message.
    let out = bin()
        .args(["show", &run_json, "--width", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--width"));
}

/// What a terminal `cols` columns wide showed while `args` ran on it: stdout and stderr both
/// the terminal (a pseudo-terminal of that size, $COLUMNS unset), as a person sees them, with
/// the progress lines drawn. Returns the exit status and everything the terminal received.
fn on_pty(dir: &Path, args: &[String], cols: u16) -> (Option<i32>, String) {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 50,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the integers given; the name is not asked
    // for, and the terminal settings are left at their defaults.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = bin();
    cmd.args(args)
        .current_dir(dir)
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color")
        .stdin(std::process::Stdio::null())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    let mut child = cmd.spawn().unwrap();
    // The terminal's end: nothing else may hold the other end, or reading never ends.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut all = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                // EIO: every writer of the terminal has closed it.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        all
    });
    let status = child.wait().unwrap();
    let text = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    (status.code(), text)
}

/// Lines of terminal text wider than `width`: a line ends at a newline or a carriage return
/// (a progress line redrawn in place), and escape sequences take no columns.
fn screen_too_wide(text: &str, width: usize) -> Vec<String> {
    text.split(['\n', '\r'])
        .filter(|l| iolens::out::visible_width(l) > width)
        .map(|l| format!("{} columns: {l:?}", iolens::out::visible_width(l)))
        .collect()
}

/// Every command of the README's usage list, as a person runs it on a terminal 80 and 60
/// columns wide: no line the terminal shows is wider (results, progress lines, notes,
/// warnings and errors alike), and no command panics. Left out: `completions` and `man`
/// (a script and a manual page for programs, not text for a terminal), `export --markdown`
/// (a Markdown table is pasted, not wrapped), `db … --engine postgres` and `db sample` (need a
/// server; the sqlite engine prints through the same code, and `ingest --format pg-stat-io`
/// the same pg_stat_io figures `db sample` takes), and `profile` unless root (BPF).
#[test]
fn every_usage_command_fits_80_and_60_columns_on_a_terminal() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let fx = |p: &str| fixtures.join(p).to_str().unwrap().to_string();
    let trace = fx("real/js122a1_ora_9854.trc");
    let bio = fx("real/bcc_biolatency_D.txt");
    let evh = fx("sources/event_histogram_micro.csv");
    let awr = fx("real/statspack_11204_igt.txt");
    let perf = fx("recorded/perf-script-spin_ab.txt");
    let pgio = fx("real/pg18_stat_io_watch.txt");
    let root = unsafe { libc::geteuid() } == 0;
    for cols in [80u16, 60] {
        let dir = tempfile::tempdir().unwrap();
        // A process to profile, alive for the whole profile: the commands before `profile` take
        // over 30 s on a loaded CI machine, so it outlives them by far and is killed at the end.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap();
        let pid = sleeper.id().to_string();
        let short = "--duration 0.6s --interval 200ms";
        // (command line, must it succeed?)
        let mut cmds: Vec<(String, bool)> = vec![
            (format!("run --target s.dat --size 8M --pattern randread --bs 8k --sessions 2 {short} --json run.json"), true),
            (format!("run --target s.dat --pattern randread --bs 8k --sessions 2 {short} --json run2.json"), true),
            (format!("run --target s.dat --pattern randread --engine uring --qd 8 --sessions 1 {short}"), false),
            (format!("run --target s.dat --pattern write --bs 8k --sync dsync --sessions 1 {short}"), true),
            (format!("run --target s.dat --pattern write --bs 8k --sync fdatasync:4 {short}"), true),
            (format!("run --target s.dat --pattern randrw --read-pct 80 --sessions 2 {short}"), true),
            (format!("run --target s.dat --dist zipf:0.9 {short}"), true),
            (format!("run --target s.dat --dist hotspot:90:5 {short}"), true),
            (format!("run --target s.dat --rate 500 {short}"), true),
            (format!("run --target n.dat --size 1M --engine null {short}"), true),
            (format!("run --target s.dat --sessions 4 --huge-pages off {short}"), true),
            ("run --target s.dat --sessions 16 --pattern randrw --read-pct 80 --explain".into(), true),
            (format!("run --target s.dat --verify header --on-corruption continue {short}"), true),
            ("verify --target s.dat".into(), true),
            (format!("run --target s.dat --refill {short}"), true),
            (format!("run --target g.dat --size 4M {short}"), true),
            (format!("run --target g.dat --size 8M --grow {short}"), true),
            ("calibrate --target c.dat --budget 6s --max-latency 2ms --percentile 99 --max-sessions 2 --max-qd 1 --phases randread,seqread1 --size 32M --json cal.json".into(), true),
            ("calibrate --target c.dat --writes --cache-probe --explain".into(), true),
            ("calibrate --target c.dat --explain".into(), true),
            // `plan` needs a load curve: a ramp of several session counts. Whether a goal is met
            // depends on what this machine delivers now: a plan or its clear error, both fit.
            ("calibrate --target c.dat --budget 8s --max-latency 50ms --max-sessions 4 --max-qd 1 --phases randread --size 32M --json curve.json".into(), true),
            ("plan curve.json --iops 500000 --p99 1ms --hosts 2 --paths 4 --port-queue 2048 --lun-queue 30".into(), false),
            ("plan curve.json --iops 3000 --p99 20ms --json plan.json".into(), false),
            ("show plan.json".into(), false),
            ("plan curve.json --iops 3000 --p99 20ms --verify --target v.dat --size 32M".into(), false),
            ("show run.json".into(), true),
            ("show cal.json".into(), true),
            ("report run.json -o run.html".into(), true),
            ("compare run.json run2.json -o cmp.html".into(), true),
            ("compare run.json run2.json".into(), true),
            ("compare run.json run2.json --force".into(), true),
            ("export run.json --csv intervals.csv --hlog run.hlog".into(), true),
            ("db setup --engine sqlite --dir slob --schemas 1 --scale 8M".into(), true),
            ("db run --engine sqlite --dir slob --sessions 2 --update-pct 20 --work-unit 8 --duration 1s --json db.json".into(), true),
            ("show db.json".into(), true),
            ("db drop --engine sqlite --dir slob".into(), true),
            (format!("trace {trace} --json trace.json"), true),
            (format!("trace {trace} --event PL/SQL-lock-timer"), true),
            ("show trace.json".into(), true),
            (format!("ingest --format event-histogram {evh} --json hist.json"), true),
            ("show hist.json".into(), true),
            (format!("ingest --format biolatency {bio}"), true),
            (format!("ingest --format awr {awr} --json awr.json"), true),
            (format!("ingest --format pg-stat-io {pgio} --json io.json"), true),
            ("show io.json".into(), true),
            (format!("ingest --format perf-script {perf} --json prof.json"), true),
            ("show prof.json".into(), true),
            ("export prof.json --flame flame.svg --folded stacks.folded".into(), true),
            // Errors a person meets: they fit too.
            ("show missing.json".into(), false),
            ("run --target s.dat --size 64M --duration 1s".into(), false),
            ("run --target s.dat --bs 3k --duration 1s".into(), false),
        ];
        if root {
            cmds.push((format!("profile --pid {pid} --duration 1s -o flame2.svg --folded out.folded --json prof2.json"), true));
            cmds.push((
                format!("profile --pid {pid} --off-cpu --frequency 99 --duration 1s -o flame3.svg"),
                true,
            ));
            cmds.push((
                "profile --comm sleep --off-cpu --frequency 99 --duration 1s -o flame4.svg".into(),
                true,
            ));
        } else {
            eprintln!("note: `profile` left out of the width test: it needs root");
        }
        for (line, must) in &cmds {
            // `PL/SQL-lock-timer` stands for one argument with spaces.
            let args: Vec<String> = line
                .split(' ')
                .map(|a| a.replace("PL/SQL-lock-timer", "PL/SQL lock timer"))
                .collect();
            let (code, text) = on_pty(dir.path(), &args, cols);
            assert!(
                !text.contains("panicked"),
                "iolens {line} at {cols} columns panicked:\n{text}"
            );
            if *must {
                assert_eq!(code, Some(0), "iolens {line} at {cols} columns:\n{text}");
            } else {
                assert!(code.is_some(), "iolens {line}: killed by a signal\n{text}");
            }
            let wide = screen_too_wide(&text, cols as usize);
            assert!(
                wide.is_empty(),
                "iolens {line} on a terminal of {cols} columns: lines wider than it:\n{}\n--- \
                 the whole screen:\n{text}",
                wide.join("\n")
            );
        }
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
}

/// The test server's DSN ([`common::pg_dsn`]).
fn pg_dsn() -> Option<String> {
    common::pg_dsn("PostgreSQL width test")
}

/// The README's PostgreSQL `db` commands (setup, run, sample, drop; `show` of what they wrote)
/// on a terminal 80 and 60 columns wide, against a real server in a database made for the
/// test: no line the terminal shows is wider, progress and warnings included; and the errors a
/// person meets first (no server at the socket, no such database) fit too.
#[test]
fn postgres_db_commands_fit_80_and_60_columns_on_a_terminal() {
    let Some(base) = pg_dsn() else {
        return;
    };
    let name = "iolens_width";
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let dsn = format!("{base} dbname={name}");
    let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let with_dsn = |head: &str, dsn: &str, tail: &str| {
        let mut v = words(head);
        v.extend(["--dsn".to_string(), dsn.to_string()]);
        v.extend(words(tail));
        v
    };
    for cols in [80u16, 60] {
        let dir = tempfile::tempdir().unwrap();
        // (arguments, must it succeed?)
        let cmds: Vec<(Vec<String>, bool)> = vec![
            (
                with_dsn("db setup --engine postgres", &dsn, "--schemas 1 --scale 8M"),
                true,
            ),
            (
                with_dsn(
                    "db run --engine postgres",
                    &dsn,
                    "--sessions 2 --duration 1s --interval 200ms --json pg.json",
                ),
                true,
            ),
            (words("show pg.json"), true),
            (
                with_dsn(
                    "db sample --engine postgres",
                    &dsn,
                    "--interval 200ms --duration 1s --json io.json",
                ),
                true,
            ),
            (words("show io.json"), true),
            (with_dsn("db drop --engine postgres", &dsn, ""), true),
            (
                with_dsn(
                    "db run --engine postgres",
                    "host=/nonexistent/iolens-socket-dir dbname=postgres",
                    "--sessions 2 --duration 1s",
                ),
                false,
            ),
            (
                with_dsn(
                    "db run --engine postgres",
                    &format!("{base} dbname=iolens_no_such_database"),
                    "--sessions 2 --duration 1s",
                ),
                false,
            ),
        ];
        for (args, must) in &cmds {
            let args: Vec<String> = args.iter().filter(|a| !a.is_empty()).cloned().collect();
            let line = args.join(" ");
            let (code, text) = on_pty(dir.path(), &args, cols);
            assert!(
                !text.contains("panicked"),
                "iolens {line} at {cols} columns panicked:\n{text}"
            );
            if *must {
                assert_eq!(code, Some(0), "iolens {line} at {cols} columns:\n{text}");
            } else {
                assert_eq!(code, Some(2), "iolens {line} at {cols} columns:\n{text}");
            }
            let wide = screen_too_wide(&text, cols as usize);
            assert!(
                wide.is_empty(),
                "iolens {line} on a terminal of {cols} columns: lines wider than it:\n{}\n--- \
                 the whole screen:\n{text}",
                wide.join("\n")
            );
        }
    }
    let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
}
