//! `key = "customer_id"`: a job type's key for fairness, the value of one of its fields (see
//! `postpone::Job::key`). Whether the field exists is checked against the struct in `crate::job`.

use syn::{Expr, LitStr};

use super::{str_literal, Key};

/// `key = "field"`: one field name, not empty.
pub(super) fn key_value(value: &Expr) -> syn::Result<LitStr> {
    let lit = str_literal(value, Key::Fairness)?;
    if lit.value().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "key needs a field name: the job's key for fairness is that field's value; write {}",
                Key::Fairness.example()
            ),
        ));
    }
    Ok(lit.clone())
}
