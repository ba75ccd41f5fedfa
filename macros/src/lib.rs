//! `#[derive(Job)]` for postpone (to be written).
use proc_macro::TokenStream;

/// Derives `postpone::Job`.
#[proc_macro_derive(Job, attributes(job))]
pub fn derive_job(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
