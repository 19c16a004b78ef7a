//! Names that results carry from outside (run and op names, hosts and merged files' names,
//! processes' names, roles and wait events) made single-line plain text as results are read, so no renderer can print a
//! newline, tab or escape sequence that a hostile or damaged file (or a process that renamed
//! itself) put into a name. Everything a renderer prints comes through a loaded or a finished
//! [`Results`]: this is applied to both.

use super::Results;
use crate::out::make_one_line;

impl Results {
    /// Make every name in the document one line of plain text ([`crate::out::one_line`]).
    pub fn clean_labels(&mut self) {
        make_one_line(&mut self.environment.hostname);
        if let Some(p) = &mut self.placement {
            make_one_line(&mut p.host);
        }
        if let Some(m) = &mut self.merge {
            for i in &mut m.inputs {
                make_one_line(&mut i.file);
                make_one_line(&mut i.host);
            }
            for run in &mut m.runs {
                make_one_line(&mut run.name);
                for r in &mut run.ranks {
                    make_one_line(&mut r.host);
                }
                for s in &mut run.stragglers {
                    make_one_line(&mut s.host);
                    make_one_line(&mut s.detail);
                }
            }
        }
        for run in &mut self.runs {
            make_one_line(&mut run.name);
            for op in &mut run.ops {
                make_one_line(&mut op.op);
            }
        }
        if let Some(w) = &mut self.watch {
            for t in &mut w.threads {
                make_one_line(&mut t.comm);
            }
            for p in &mut w.processes {
                make_one_line(&mut p.comm);
            }
            for c in &mut w.comms {
                make_one_line(c);
            }
            if let Some(pg) = &mut w.pg {
                for role in &mut pg.roles {
                    make_one_line(&mut role.role);
                    for row in &mut role.rows {
                        make_one_line(&mut row.event);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::out::one_line;

    #[test]
    fn control_characters_become_escapes_and_names_stay_distinct() {
        assert_eq!(one_line("plain name µs"), "plain name µs");
        assert_eq!(one_line("a\nb"), "a\\nb");
        assert_eq!(one_line("x\x1b[31mred"), "x\\u{1b}[31mred");
        assert_eq!(one_line("r\u{202e}tl"), "r\\u{202e}tl");
        assert_ne!(one_line("a\nb"), one_line("a\tb"));
    }
}
