//! `unique = ["product_id"]` with `unique_for = "10m"`: a job type unique by some of its fields for a
//! window (see `postpone::Unique`).

use syn::{Expr, Lit, LitStr};

use super::{duration_value, unwrap_group, Key};

/// `unique = ["field", ...]`: one or more field names, each once.
pub(super) fn unique_value(value: &Expr) -> syn::Result<Vec<LitStr>> {
    let wrong = || {
        syn::Error::new_spanned(
            value,
            format!(
                "unique must be an array of field names: write {}",
                Key::Unique.example()
            ),
        )
    };
    let Expr::Array(array) = unwrap_group(value) else {
        return Err(wrong());
    };
    let mut fields: Vec<LitStr> = Vec::new();
    for elem in &array.elems {
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) = unwrap_group(elem)
        else {
            return Err(syn::Error::new_spanned(
                elem,
                "each entry of unique is a field name as a string: `\"product_id\"`",
            ));
        };
        if fields.iter().any(|f| f.value() == lit.value()) {
            return Err(syn::Error::new(
                lit.span(),
                format!("field {:?} is in unique twice: give it once", lit.value()),
            ));
        }
        fields.push(lit.clone());
    }
    if fields.is_empty() {
        return Err(syn::Error::new_spanned(
            value,
            "unique needs at least one field: the key is made of their values",
        ));
    }
    Ok(fields)
}

/// `unique_for = "10m"`: more than 0.
pub(super) fn unique_for_value(value: &Expr) -> syn::Result<u64> {
    let ms = duration_value(value, Key::UniqueFor)?;
    if ms == 0 {
        return Err(syn::Error::new_spanned(
            value,
            "unique_for must be longer than 0: the window each job holds its key, e.g. \"10m\"",
        ));
    }
    Ok(ms)
}
