//! List commands.

use crate::table::CommandTable;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    let _ = table;
}
