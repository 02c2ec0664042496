//! MULTI, EXEC, DISCARD. The worker runs them: it owns the queue of a MULTI block and
//! the transaction EXEC starts (see `tx.rs`).

use crate::table::CommandTable;
use crate::table::handler::Exec;
use crate::table::meta;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::MULTI, Exec::Transaction);
    table.add(&meta::EXEC, Exec::Transaction);
    table.add(&meta::DISCARD, Exec::Transaction);
}
