//! Lua values an interpreter keeps from one call to the next (compiled scripts, the idle
//! main functions of finished runs, suspended runs, a library's functions), held in a
//! Lua table by number rather than as mlua handles.
//!
//! Each mlua handle (`Function`, `Table`, `Thread`, a string) takes a slot of mlua's
//! reference stack, a Lua thread that holds 8,000 values at most (`LUAI_MAXCSTACK`); a
//! handle made when it is full aborts the process (mlua panics, and the release build
//! aborts on a panic). Handles kept by the thousand — one per script a client ever ran,
//! say — would fill it: 8,000 distinct scripts, and the next EVAL killed the server. A
//! [`Kept`] takes one slot, whatever it holds; a value is a handle only while it is used.

use mlua::{FromLua, IntoLua, Lua, Table, Value};

/// Where a kept value is: its index in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(usize);

/// A Lua table of values by [`Slot`], with the slots freed for reuse.
pub struct Kept {
    table: Table,
    /// Slots emptied, taken again before the table grows.
    free: Vec<usize>,
    /// The highest slot ever used.
    top: usize,
}

impl Kept {
    /// An empty store in `lua`.
    pub fn new(lua: &Lua) -> mlua::Result<Kept> {
        Ok(Kept {
            table: lua.create_table()?,
            free: Vec::new(),
            top: 0,
        })
    }

    /// Keeps `value`; where it is.
    pub fn put(&mut self, value: impl IntoLua) -> mlua::Result<Slot> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.top += 1;
                self.top
            }
        };
        self.table.raw_set(slot, value)?;
        Ok(Slot(slot))
    }

    /// The value at `slot`, kept.
    pub fn get<V: FromLua>(&self, slot: Slot) -> mlua::Result<V> {
        self.table.raw_get(slot.0)
    }

    /// The value at `slot`, no longer kept.
    pub fn take<V: FromLua>(&mut self, slot: Slot) -> mlua::Result<V> {
        let value = self.table.raw_get(slot.0)?;
        self.remove(slot);
        Ok(value)
    }

    /// Forgets the value at `slot`.
    pub fn remove(&mut self, slot: Slot) {
        // (Setting nil allocates nothing: it cannot fail but for a table that is gone.)
        if self.table.raw_set(slot.0, Value::Nil).is_ok() {
            self.free.push(slot.0);
        }
    }

    /// Forgets every value.
    pub fn clear(&mut self) {
        for slot in 1..=self.top {
            let _ = self.table.raw_set(slot, Value::Nil);
        }
        self.free.clear();
        self.top = 0;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// More values than mlua's reference stack holds, kept at once: no handle each.
    #[test]
    fn keeps_more_values_than_handles_can_be_made() {
        let lua = Lua::new();
        let mut kept = Kept::new(&lua).unwrap();
        let slots: Vec<Slot> = (0..20_000)
            .map(|i| {
                let f = lua.load(format!("return {i}")).into_function().unwrap();
                kept.put(f).unwrap()
            })
            .collect();
        let f: mlua::Function = kept.get(slots[12_345]).unwrap();
        assert_eq!(f.call::<i64>(()).unwrap(), 12_345);
        let taken: mlua::Function = kept.take(slots[7]).unwrap();
        assert_eq!(taken.call::<i64>(()).unwrap(), 7);
        assert!(
            kept.get::<Option<mlua::Function>>(slots[7])
                .unwrap()
                .is_none()
        );
        // The freed slot is used again.
        assert_eq!(kept.put(1).unwrap(), slots[7]);
        kept.clear();
        assert!(kept.get::<Option<i64>>(slots[7]).unwrap().is_none());
    }
}
