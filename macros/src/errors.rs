//! Collecting several compile errors so one build reports them all.

/// Errors gathered while checking an input; reported together.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error after the ones already gathered.
    pub(crate) fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(err),
            None => self.0 = Some(err),
        }
    }

    /// Keeps `result`'s value, or gathers its error.
    pub(crate) fn keep<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|err| self.push(err)).ok()
    }

    /// `Err` with every error gathered, or `Ok` when there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
