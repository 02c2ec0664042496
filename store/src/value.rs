//! Values a key can hold.

/// A key's value. Strings are binary-safe byte strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
}

impl Value {
    /// The name `TYPE` reports for the value.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
        }
    }

    /// The bytes of a string value; `None` for other types.
    pub fn as_str(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s),
        }
    }
}
