//! Setting up the SQLite layout: checking every directory before any is written, creating and
//! loading each part's schemas, checking a loaded schema, and removing the layout.

use super::*;
/// Build, resume or re-verify the layout in `dir`. `max_rows` bounds the rows this call loads
/// (for resumption tests); `None` loads everything.
pub fn setup(
    dir: &Path,
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    setup_over(&[dir.to_path_buf()], layout, max_rows, progress)
}

/// Directories given twice (by another spelling too) would hold two parts in one file.
pub(super) fn distinct(dirs: &[PathBuf]) -> Result<()> {
    if dirs.is_empty() {
        bail!("the sqlite engine needs --dir DIR (where the database file lives)");
    }
    let key = |d: &Path| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
    for (i, a) in dirs.iter().enumerate() {
        if let Some(b) = dirs[..i].iter().find(|b| key(b) == key(a)) {
            bail!(
                "--dir {} and --dir {} are the same directory: each --dir holds its own part of \
                 the layout",
                b.display(),
                a.display()
            );
        }
    }
    Ok(())
}

/// Build, resume or re-verify the layout over `dirs`: schema `s` in the database file of
/// `dirs[s mod dirs.len()]` ([`Part`]). Every directory is checked (ownership, layout, part,
/// free space) before anything is created in any of them.
pub fn setup_over(
    dirs: &[PathBuf],
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    distinct(dirs)?;
    let n = dirs.len() as u32;
    if layout.schemas < n {
        bail!(
            "{n} directories need at least {n} schemas (--schemas): schema s lives in the \
             directory given s mod {n}-th"
        );
    }
    let checked = dirs
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let part = Part {
                index: k as u32,
                of: n,
            };
            explain_error(check_part(d, layout, part), d).map(|e| (d, part, e))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut out = SetupOutcome {
        rows_loaded: 0,
        complete: true,
        checks: Vec::new(),
    };
    let mut budget = max_rows;
    for (d, part, exists) in checked {
        let o = explain_error(build_part(d, layout, part, exists, budget, progress), d)?;
        out.rows_loaded += o.rows_loaded;
        out.checks.extend(o.checks);
        budget = budget.map(|b| b.saturating_sub(o.rows_loaded));
        if !o.complete {
            out.complete = false;
            break;
        }
    }
    out.checks.sort_by_key(|c| c.schema);
    Ok(out)
}

/// Check `dir` for `part` of `layout` before anything is written: an existing file must be
/// iolens' own, of this layout and part; the space its schemas need must be free. Returns
/// whether the file exists.
pub(super) fn check_part(dir: &Path, layout: &Layout, part: Part) -> Result<bool> {
    let path = db_file(dir)?;
    let exists = path.exists();
    let already = if exists {
        let c = open_plain(&path, false)?;
        match read_state_part(&c)? {
            None => bail!(
                "{} exists but was not created by `iolens db setup`; refusing to touch it",
                path.display()
            ),
            Some((l, p, got)) => {
                if got != part {
                    bail!(
                        "{} holds part {} of a layout over {} directories, not part {} of {}: \
                         give the same --dir list in the same order, or remove it with \
                         `iolens db drop --dir {}`",
                        path.display(),
                        got.index + 1,
                        got.of,
                        part.index + 1,
                        part.of,
                        dir.display()
                    );
                }
                if &l != layout {
                    bail!(
                        "{} holds a different layout ({} schemas × {} rows, seed {}); use the same \
                         --schemas/--scale/--seed, or remove it with `iolens db drop --dir {}`",
                        path.display(),
                        l.schemas,
                        l.rows,
                        l.seed,
                        dir.display()
                    );
                }
                p.iter().map(|p| p.loaded).sum::<u64>()
            }
        }
    } else {
        0
    };
    // Space check before anything is created (or before resuming).
    let total_rows = part.schemas(layout).count() as u64 * layout.rows;
    let remaining = total_rows - already.min(total_rows);
    let need = remaining * BLOCK * 105 / 100 + total_rows * 40 + (16 << 20);
    let free = host::free_bytes(dir)?;
    if need > free {
        bail!(
            "--scale {} × {} schemas needs about {} more on {}, but only {} is free{}",
            fmt_bytes(layout.rows * BLOCK),
            layout.schemas,
            fmt_bytes(need),
            host::existing_ancestor(dir).display(),
            fmt_bytes(free),
            if exists {
                format!(
                    "; the partial database {} was left as it is",
                    path.display()
                )
            } else {
                "; nothing was created".to_string()
            }
        );
    }
    Ok(exists)
}

/// Create (unless `exists`), load and verify `part` of `layout` in `dir` (checked by
/// [`check_part`]).
pub(super) fn build_part(
    dir: &Path,
    layout: &Layout,
    part: Part,
    exists: bool,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    let path = db_file(dir)?;
    if !exists {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create directory {}", dir.display()))?;
    }
    let mut conn = open_plain(&path, true)?;
    if !exists {
        create_schema(&mut conn, layout, part)
            .with_context(|| format!("cannot create {}", path.display()))?;
    }
    let r = load_and_check(&mut conn, layout, max_rows, progress);
    match r {
        Ok(o) => {
            if progress {
                if o.complete {
                    print_checks(&o.checks, "overflow pages", "key/position");
                    crate::outln!(
                        "setup complete: {} ({} data) verified",
                        path.display(),
                        fmt_bytes(layout.data_bytes())
                    );
                } else {
                    crate::outln!("setup paused after {} rows; rerun to resume", o.rows_loaded);
                }
            }
            Ok(o)
        }
        Err(e) => {
            let state = read_state(&conn)
                .ok()
                .flatten()
                .map(|(_, p)| {
                    p.iter()
                        .map(|p| {
                            format!("schema {}: {} of {} rows", p.schema, p.loaded, layout.rows)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| "state unknown".to_string());
            Err(e.context(format!(
                "setup stopped; the partial database {} remains ({state}): rerun the same command \
                 to resume, or remove it with `iolens db drop --dir {}`",
                path.display(),
                dir.display()
            )))
        }
    }
}

pub(super) fn create_schema(conn: &mut Connection, layout: &Layout, part: Part) -> Result<()> {
    conn.execute_batch("PRAGMA page_size=8192; PRAGMA journal_mode=WAL;")?;
    let ps: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if ps != BLOCK as i64 {
        bail!("SQLite did not accept an 8 KiB page size (got {ps})");
    }
    let tx = conn.transaction()?;
    tx.execute_batch(
        "CREATE TABLE iolens_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE iolens_progress(schema INTEGER PRIMARY KEY, loaded INTEGER NOT NULL,
                                      indexed INTEGER NOT NULL, checked TEXT);",
    )?;
    tx.execute(
        "INSERT INTO iolens_meta VALUES ('format', ?1), ('layout', ?2)",
        params![FORMAT, serde_json::to_string(layout)?],
    )?;
    if part != Part::WHOLE {
        tx.execute(
            "INSERT INTO iolens_meta VALUES ('part', ?1)",
            params![serde_json::to_string(&part)?],
        )?;
    }
    for s in part.schemas(layout) {
        tx.execute_batch(&format!(
            "CREATE TABLE t{s}(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v INTEGER NOT NULL, \
             pad BLOB NOT NULL);"
        ))?;
        tx.execute(
            "INSERT INTO iolens_progress VALUES (?1, 0, 0, NULL)",
            [s as i64],
        )?;
    }
    tx.commit()?;
    Ok(())
}

pub(super) fn load_and_check(
    conn: &mut Connection,
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA cache_size=-8192;")?;
    load::load_and_check(&mut SqliteLoader(conn), layout, max_rows, progress)
}

/// The shared load loop's SQLite side: rowid order is physical order; the WAL is checkpointed
/// before and after the checks.
pub(super) struct SqliteLoader<'c>(&'c mut Connection);

impl Loader for SqliteLoader<'_> {
    const CHUNK: u64 = CHUNK;
    const PAD_BYTES: usize = PAD_BYTES;

    fn state(&mut self) -> Result<Vec<LoadState>> {
        let (_, prog) = read_state(self.0)?.context("iolens_meta vanished")?;
        Ok(prog
            .into_iter()
            .map(|p| LoadState {
                schema: p.schema,
                loaded: p.loaded,
                indexed: p.indexed,
                checked: p.check.is_some(),
            })
            .collect())
    }

    fn table(&self, s: u32) -> String {
        format!("schema {s}")
    }

    fn load_chunk(&mut self, s: u32, first: u64, n: u64, rows: &mut Rows) -> Result<()> {
        let tx = self.0.transaction()?;
        {
            let mut ins = tx.prepare_cached(&format!(
                "INSERT INTO t{s}(id, k, v, pad) VALUES (?1, ?2, 0, ?3)"
            ))?;
            for i in first..first + n {
                let (k, pad) = rows.row(i);
                ins.execute(params![(i + 1) as i64, k, pad])?;
            }
            tx.execute(
                "UPDATE iolens_progress SET loaded=?1 WHERE schema=?2",
                params![(first + n) as i64, s as i64],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn index_name(&self, s: u32) -> String {
        format!("t{s}_k")
    }

    fn build_index(&mut self, s: u32) -> Result<()> {
        let tx = self.0.transaction()?;
        tx.execute_batch(&format!("CREATE INDEX IF NOT EXISTS t{s}_k ON t{s}(k);"))?;
        tx.execute(
            "UPDATE iolens_progress SET indexed=1 WHERE schema=?1",
            [s as i64],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        self.0
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    fn check(&mut self, s: u32) -> Result<LayoutCheck> {
        check_schema(self.0, s)
    }

    fn record_check(&mut self, s: u32, c: &LayoutCheck) -> Result<()> {
        self.0.execute(
            "UPDATE iolens_progress SET checked=?1 WHERE schema=?2",
            params![serde_json::to_string(c)?, s as i64],
        )?;
        Ok(())
    }
}

/// Verify one schema's layout from SQLite's own page map (the `dbstat` virtual table).
pub(crate) fn check_schema(conn: &Connection, s: u32) -> Result<LayoutCheck> {
    let t = format!("t{s}");
    let rows: i64 = conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))?;
    // Leaf pages in tree (= id) order; with one row per leaf, leaf j holds id j+1.
    let mut st =
        conn.prepare("SELECT pagetype, ncell, pageno FROM dbstat WHERE name=?1 ORDER BY path")?;
    let mut leaf_pages: Vec<u32> = Vec::with_capacity(rows as usize);
    let mut max_cells = 0u64;
    let mut overflow = 0u64;
    let mut q = st.query([&t])?;
    while let Some(r) = q.next()? {
        let ty: String = r.get(0)?;
        let ncell: i64 = r.get(1)?;
        match ty.as_str() {
            "leaf" => {
                leaf_pages.push(r.get::<_, i64>(2)? as u32);
                max_cells = max_cells.max(ncell as u64);
            }
            "overflow" => overflow += 1,
            _ => {}
        }
    }
    let index_present: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type='index' AND name=?1 AND tbl_name=?2",
        params![format!("{t}_k"), t],
        |r| r.get(0),
    )?;
    // Walk the index in key order and look up each row's physical page.
    // 0 when it cannot be computed (the missing index is reported as a problem of its own).
    let mut corr = 0.0;
    let mut adjacent = 0u64;
    if index_present > 0 && leaf_pages.len() as i64 == rows {
        let mut st = conn.prepare(&format!(
            "SELECT k, id FROM {t} INDEXED BY {t}_k ORDER BY k"
        ))?;
        let mut q = st.query([])?;
        let (mut n, mut sx, mut sy, mut sxx, mut syy, mut sxy) =
            (0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
        let mut prev: Option<i64> = None;
        while let Some(r) = q.next()? {
            let k: i64 = r.get(0)?;
            let id: i64 = r.get(1)?;
            let page = *leaf_pages
                .get((id - 1) as usize)
                .context("row id outside the table's leaf pages")? as i64;
            let (x, y) = (k as f64, page as f64);
            n += 1.0;
            sx += x;
            sy += y;
            sxx += x * x;
            syy += y * y;
            sxy += x * y;
            if let Some(p) = prev {
                if (page - p).abs() <= 1 {
                    adjacent += 1;
                }
            }
            prev = Some(page);
        }
        let cov = sxy / n - (sx / n) * (sy / n);
        let vx = sxx / n - (sx / n).powi(2);
        let vy = syy / n - (sy / n).powi(2);
        corr = cov / (vx * vy).sqrt();
    }
    Ok(LayoutCheck {
        schema: s,
        rows: rows as u64,
        blocks: leaf_pages.len() as u64,
        max_rows_per_block: max_cells,
        overflow_pages: overflow,
        index_present: index_present > 0,
        key_position_corr: corr,
        adjacent_share: if rows > 1 {
            adjacent as f64 / (rows - 1) as f64
        } else {
            0.0
        },
    })
}

/// Remove the database files `setup` created in `dir`.
pub(crate) fn drop_layout(dir: &Path) -> Result<()> {
    let path = db_file(dir)?;
    if !path.exists() {
        bail!("no iolens database in {} (nothing to drop)", dir.display());
    }
    {
        let c = open_plain(&path, false)?;
        if read_state(&c)?.is_none() {
            bail!(
                "{} was not created by `iolens db setup`; refusing to remove it",
                path.display()
            );
        }
    }
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        if p.exists() {
            std::fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
        }
    }
    crate::outln!("removed {}", path.display());
    Ok(())
}
