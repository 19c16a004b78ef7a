//! PostgreSQL engine (in progress).
use anyhow::{bail, Result};
use super::{Layout, RunSpec};
use crate::results::Results;
pub fn setup(_d: &str, _l: &Layout, _m: Option<u64>, _p: bool) -> Result<()> { bail!("todo") }
pub fn run(_d: &str, _s: &RunSpec, _c: Vec<String>) -> Result<Results> { bail!("todo") }
pub fn drop_layout(_d: &str) -> Result<()> { bail!("todo") }
