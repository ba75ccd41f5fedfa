//! Guides longer than an item's docs. Their code blocks run as doctests, so they stay true.

#[doc = include_str!("../docs/testing.md")]
pub mod testing {}
