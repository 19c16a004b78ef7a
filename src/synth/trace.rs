//! A synthetic Oracle extended SQL trace (event 10046), for the trace reader's benchmark
//! (`bench/trace-speed.sh`) and tests.

use std::io::Write;

/// Write a realistic 12c-style trace of about `size` bytes: a header, a cursor, and repeated
/// FETCH calls each preceded by single-block reads and SQL*Net waits. Returns the wait count.
pub fn write_synthetic_trace(w: &mut dyn Write, size: u64, seed: u64) -> std::io::Result<u64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut written = 0u64;
    let mut waits = 0u64;
    let mut tim: u64 = 2_707_602_560_910;
    let head = "Trace file /u01/app/oracle/diag/rdbms/orcl/orcl/trace/orcl_ora_12345.trc\n\
Oracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production\n\
Version 19.3.0.0.0\n\
Build label:    RDBMS_19.3.0.0.0DBRU_LINUX.X64_190417\n\
ORACLE_HOME:    /u01/app/oracle/product/19.0.0/dbhome_1\n\
System name:\tLinux\n\
Node name:\tdbhost\n\
Release:\t4.14.35-1902.el7uek.x86_64\n\
Version:\t#2 SMP Fri Aug 9 09:35:18 PDT 2019\n\
Machine:\tx86_64\n\
Instance name: orcl\n\
Redo thread mounted by this instance: 1\n\
Oracle process number: 38\n\
Unix process pid: 12345, image: oracle@dbhost\n\n\n\
*** 2024-03-01T10:00:00.000000+00:00\n\
*** SESSION ID:(152.56419) 2024-03-01T10:00:00.000012+00:00\n\
*** CLIENT ID:() 2024-03-01T10:00:00.000015+00:00\n\
*** SERVICE NAME:(SYS$USERS) 2024-03-01T10:00:00.000016+00:00\n\
*** MODULE NAME:(SQL*Plus) 2024-03-01T10:00:00.000018+00:00\n\n\
=====================\n\
PARSING IN CURSOR #140234567 len=37 dep=0 uid=0 oct=3 lid=0 tim=2707602560910 hv=1 ad='7f' sqlid='abc'\n\
select * from big_table where id > :1\n\
END OF STMT\n\
PARSE #140234567:c=120,e=150,p=0,cr=0,cu=0,mis=1,r=0,dep=0,og=1,plh=0,tim=2707602560910\n\
EXEC #140234567:c=50,e=60,p=0,cr=0,cu=0,mis=0,r=0,dep=0,og=1,plh=1,tim=2707602560980\n";
    w.write_all(head.as_bytes())?;
    written += head.len() as u64;
    let mut line = String::with_capacity(256);
    use std::fmt::Write as _;
    while written < size {
        // Between-call wait, then a FETCH with a few reads.
        let idle = rng.gen_range(50..400u64);
        tim += idle;
        line.clear();
        let _ = writeln!(
            line,
            "WAIT #140234567: nam='SQL*Net message from client' ela= {idle} driver id=1650815232 #bytes=1 p3=0 obj#=-1 tim={tim}"
        );
        let start = tim;
        let mut in_call = 0;
        for _ in 0..rng.gen_range(1..8) {
            let ela: u64 = if rng.gen_bool(0.9) {
                rng.gen_range(80..400)
            } else {
                rng.gen_range(2_000..20_000)
            };
            tim += ela + 5;
            in_call += ela;
            let _ = writeln!(
                line,
                "WAIT #140234567: nam='db file sequential read' ela= {ela} file#={} block#={} blocks=1 obj#={} tim={tim}",
                rng.gen_range(5..9),
                rng.gen_range(128..4_000_000u64),
                73_000 + rng.gen_range(0..40),
            );
            waits += 1;
        }
        tim += 30;
        let _ = writeln!(
            line,
            "WAIT #140234567: nam='SQL*Net message to client' ela= 2 driver id=1650815232 #bytes=1 p3=0 obj#=-1 tim={tim}"
        );
        let e = tim - start - 1;
        let _ = writeln!(
            line,
            "FETCH #140234567:c={},e={e},p=3,cr=5,cu=0,mis=0,r=15,dep=0,og=1,plh=1,tim={tim}",
            e.saturating_sub(in_call + 2)
        );
        waits += 2;
        w.write_all(line.as_bytes())?;
        written += line.len() as u64;
    }
    Ok(waits)
}
