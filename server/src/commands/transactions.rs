//! MULTI, EXEC, DISCARD. The worker runs them: it owns the queue of a MULTI block and
//! the transaction EXEC starts (see `tx.rs`).

use crate::command::CommandTable;
use crate::command::meta;
use crate::exec::Exec;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::MULTI, Exec::Transaction);
    table.add(&meta::EXEC, Exec::Transaction);
    table.add(&meta::DISCARD, Exec::Transaction);
}
