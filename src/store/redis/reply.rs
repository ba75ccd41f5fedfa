//! Reading script replies: flat arrays of integers, bulk strings and nils.

use redis::Value;

use crate::error::{Error, Result};

/// A script's array reply, read front to back.
pub(super) struct Reply {
    items: std::vec::IntoIter<Value>,
    context: &'static str,
}

impl Reply {
    /// Wraps an array reply; anything else is a backend error.
    pub(super) fn new(value: Value, context: &'static str) -> Result<Self> {
        match value {
            Value::Array(items) | Value::Set(items) => Ok(Reply {
                items: items.into_iter(),
                context,
            }),
            other => Err(unexpected(context, &other)),
        }
    }

    /// How many items are left.
    pub(super) fn remaining(&self) -> usize {
        self.items.len()
    }

    fn next(&mut self) -> Result<Value> {
        self.items
            .next()
            .ok_or_else(|| Error::backend(self.context, "the script's reply is too short"))
    }

    /// An integer.
    pub(super) fn int(&mut self) -> Result<i64> {
        let v = self.next()?;
        as_int(&v).ok_or_else(|| unexpected(self.context, &v))
    }

    /// An integer or nil.
    pub(super) fn opt_int(&mut self) -> Result<Option<i64>> {
        match self.next()? {
            Value::Nil => Ok(None),
            v => as_int(&v)
                .map(Some)
                .ok_or_else(|| unexpected(self.context, &v)),
        }
    }

    /// A bulk string's bytes or nil.
    pub(super) fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>> {
        match self.next()? {
            Value::Nil => Ok(None),
            Value::BulkString(b) => Ok(Some(b)),
            Value::SimpleString(s) => Ok(Some(s.into_bytes())),
            v => Err(unexpected(self.context, &v)),
        }
    }

    /// A bulk string's bytes.
    pub(super) fn bytes(&mut self) -> Result<Vec<u8>> {
        self.opt_bytes()?.ok_or_else(|| {
            Error::backend(
                self.context,
                "the script returned nil where bytes were expected",
            )
        })
    }
}

/// An integer reply, also from its decimal text.
pub(super) fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// A list of integers (one outcome code per item).
pub(super) fn ints(value: Value, context: &'static str) -> Result<Vec<i64>> {
    let mut reply = Reply::new(value, context)?;
    let mut out = Vec::with_capacity(reply.remaining());
    while reply.remaining() > 0 {
        out.push(reply.int()?);
    }
    Ok(out)
}

fn unexpected(context: &'static str, v: &Value) -> Error {
    let kind = match v {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::BulkString(_) => "a bulk string",
        Value::Array(_) => "an array",
        _ => "an unexpected value",
    };
    Error::backend(context, format!("unexpected reply from Redis: {kind}"))
}
