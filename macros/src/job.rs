//! The expansion of `#[derive(Job)]`: an `impl ::postpone::Job` from the checked `#[job(...)]`.

use proc_macro2::{Literal, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Ident};

use crate::attr::{parse_job_attrs, JobAttr};
use crate::errors::Errors;

/// Expands `#[derive(Job)]` on `input`, or explains what is wrong with it.
///
/// Generated code names only `::postpone::...` paths, so users need no other dependency.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let mut errors = Errors::default();
    if let Data::Union(data) = &input.data {
        errors.push(syn::Error::new(
            data.union_token.span,
            "`#[derive(Job)]` works on structs and enums, not unions",
        ));
    }
    if !input.generics.params.is_empty() {
        let ident = &input.ident;
        errors.push(syn::Error::new_spanned(
            &input.generics,
            format!(
                "`#[derive(Job)]` does not work on generic types: a job type is bound to one topic, which \
                 every `{ident}<...>` would share; declare a concrete type for each topic"
            ),
        ));
    }
    let attr = parse_job_attrs(&input.attrs, &input.ident).and_then(|attr| {
        let mut errors = Errors::default();
        errors.keep(check_unique_fields(input, &attr));
        let key = errors.keep(key_field(input, &attr));
        errors.check()?;
        Ok((attr, key.flatten()))
    });
    match (errors.check(), attr) {
        (Ok(()), Ok((attr, key))) => Ok(impl_job(input, &attr, key.as_ref())),
        (Err(mut err), Err(attr_err)) => {
            err.combine(attr_err);
            Err(err)
        }
        (Err(err), Ok(_)) | (Ok(()), Err(err)) => Err(err),
    }
}

/// Each field of `unique` names a field of the struct (which must have named fields).
fn check_unique_fields(input: &DeriveInput, attr: &JobAttr) -> syn::Result<()> {
    let Some((fields, _)) = &attr.unique else {
        return Ok(());
    };
    let named: Vec<String> = match &input.data {
        Data::Struct(syn::DataStruct {
            fields: syn::Fields::Named(named),
            ..
        }) => named
            .named
            .iter()
            .filter_map(|f| f.ident.as_ref().map(ToString::to_string))
            .collect(),
        _ => return Err(syn::Error::new(
            fields[0].span(),
            "unique takes fields of a struct with named fields; for other types give the key per \
                 enqueue with `.unique(Unique::new(key, window))`",
        )),
    };
    let mut errors = Errors::default();
    for field in fields {
        if !named.contains(&field.value()) {
            errors.push(syn::Error::new(
                field.span(),
                format!(
                    "no field {:?} in `{}`: unique names fields of the struct ({})",
                    field.value(),
                    input.ident,
                    named.join(", ")
                ),
            ));
        }
    }
    errors.check()
}

/// The struct's field that `key` names, spanned at the name in `#[job(...)]` (so that a field whose
/// type is not `Display` is reported there); `None` without `key`.
fn key_field(input: &DeriveInput, attr: &JobAttr) -> syn::Result<Option<Ident>> {
    let Some(name) = &attr.key else {
        return Ok(None);
    };
    let Data::Struct(syn::DataStruct {
        fields: syn::Fields::Named(named),
        ..
    }) = &input.data
    else {
        return Err(syn::Error::new(
            name.span(),
            "key takes a field of a struct with named fields; for other types give the key per \
             enqueue with `.key(\"customer:42\")`",
        ));
    };
    // `key = "type"` names the field `r#type`.
    let fields: Vec<&Ident> = named
        .named
        .iter()
        .filter_map(|f| f.ident.as_ref())
        .collect();
    match fields.iter().find(|ident| ident.unraw() == name.value()) {
        Some(ident) => {
            let mut ident = (*ident).clone();
            ident.set_span(name.span());
            Ok(Some(ident))
        }
        None => {
            let names: Vec<String> = fields.iter().map(|f| f.unraw().to_string()).collect();
            Err(syn::Error::new(
                name.span(),
                format!(
                    "no field {:?} in `{}`: key names a field of the struct ({}), whose value is the \
                     job's key for fairness",
                    name.value(),
                    input.ident,
                    if names.is_empty() {
                        "it has none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ))
        }
    }
}

fn impl_job(input: &DeriveInput, attr: &JobAttr, key: Option<&Ident>) -> TokenStream2 {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let topic = &attr.topic;
    let retry = attr.retry.as_ref().map(|slots| {
        let slots = slots.iter().map(|ms| Literal::u64_unsuffixed(*ms));
        quote! {
            fn retry_schedule() -> ::postpone::__private::RetrySchedule {
                ::postpone::__private::schedule_from_millis(&[#(#slots),*])
            }
        }
    });
    let lease = attr.lease.map(|ms| optional_duration(quote!(lease), ms));
    let timeout = attr
        .timeout
        .map(|ms| optional_duration(quote!(timeout), ms));
    let partitions = attr.partitions.map(|n| {
        let n = Literal::u16_unsuffixed(n);
        quote! {
            fn partitions() -> ::core::primitive::u16 {
                #n
            }
        }
    });
    let rate = attr.rate.map(|(jobs, per_ms)| {
        let (jobs, per_ms) = (
            Literal::u32_unsuffixed(jobs),
            Literal::u64_unsuffixed(per_ms),
        );
        quote! {
            fn rate_limit() -> ::postpone::__private::Option<::postpone::__private::RateLimit> {
                ::postpone::__private::Option::Some(::postpone::__private::RateLimit::new(
                    #jobs,
                    ::postpone::__private::Duration::from_millis(#per_ms),
                ))
            }
        }
    });
    let unique = attr.unique.as_ref().map(|(fields, ms)| {
        let ms = Literal::u64_unsuffixed(*ms);
        let parts = fields.iter().map(|f| {
            let ident = syn::Ident::new(&f.value(), f.span());
            quote! { (#f, ::postpone::__private::key_part(&self.#ident)) }
        });
        quote! {
            fn unique(&self) -> ::postpone::__private::Option<::postpone::Unique> {
                ::postpone::__private::Option::Some(::postpone::Unique::new(
                    ::postpone::__private::unique_key(&[#(#parts),*]),
                    ::postpone::__private::Duration::from_millis(#ms),
                ))
            }
        }
    });
    // Spanned at the field's name in `#[job(...)]`: a field that is not `Display` is reported there.
    let key = key.map(|ident| {
        let to_string = quote_spanned! {ident.span()=>
            ::postpone::__private::ToString::to_string(&self.#ident)
        };
        quote! {
            fn key(&self) -> ::postpone::__private::Option<::postpone::__private::String> {
                ::postpone::__private::Option::Some(#to_string)
            }
        }
    });
    // Each limit set, on `KeyLimits::new()`; none without either.
    let key_limits = (attr.key_max_running.is_some() || attr.key_rate.is_some()).then(|| {
        let max_running = attr.key_max_running.map(|n| {
            let n = Literal::u32_unsuffixed(n);
            quote!(.max_running(#n))
        });
        let rate = attr.key_rate.map(|(jobs, per_ms)| {
            let (jobs, per_ms) = (
                Literal::u32_unsuffixed(jobs),
                Literal::u64_unsuffixed(per_ms),
            );
            quote! {
                .rate(::postpone::__private::RateLimit::new(
                    #jobs,
                    ::postpone::__private::Duration::from_millis(#per_ms),
                ))
            }
        });
        quote! {
            fn key_limits() -> ::postpone::__private::KeyLimits {
                ::postpone::__private::KeyLimits::new() #max_running #rate
            }
        }
    });
    let max_running = attr.max_running.map(|n| {
        let n = Literal::u32_unsuffixed(n);
        quote! {
            fn max_running() -> ::postpone::__private::Option<::core::primitive::u32> {
                ::postpone::__private::Option::Some(#n)
            }
        }
    });
    let output = match &attr.output {
        Some(ty) => quote!(#ty),
        None => quote!(()),
    };
    let keep = attr.keep.map(|(age, count)| {
        let (age, count) = (Literal::u64_unsuffixed(age), Literal::u64_unsuffixed(count));
        quote! {
            fn keep() -> ::postpone::__private::Option<::postpone::Keep> {
                ::postpone::__private::Option::Some(::postpone::Keep::new(
                    ::postpone::__private::Duration::from_millis(#age),
                    #count,
                ))
            }
        }
    });
    quote! {
        #[automatically_derived]
        impl #impl_generics ::postpone::Job for #ident #ty_generics #where_clause {
            const TOPIC: &'static str = #topic;
            type Output = #output;
            #keep
            #retry
            #lease
            #timeout
            #partitions
            #rate
            #max_running
            #unique
            #key
            #key_limits
        }
    }
}

/// `fn name() -> Option<Duration>` returning `Some(ms)`.
fn optional_duration(name: TokenStream2, ms: u64) -> TokenStream2 {
    let ms = Literal::u64_unsuffixed(ms);
    quote! {
        fn #name() -> ::postpone::__private::Option<::postpone::__private::Duration> {
            ::postpone::__private::Option::Some(::postpone::__private::Duration::from_millis(#ms))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn expand_ok(input: DeriveInput) -> String {
        expand(&input)
            .unwrap_or_else(|err| panic!("{err}"))
            .to_string()
    }

    fn expand_err(input: DeriveInput) -> Vec<String> {
        let err = expand(&input).expect_err("expected a compile error");
        err.into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn minimal() {
        let got = expand_ok(parse_quote! {
            #[derive(Serialize, Deserialize, Job)]
            #[job(topic = "orders.close")]
            struct CloseOrder { order_id: u64 }
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for CloseOrder {
                const TOPIC: &'static str = "orders.close";
                type Output = ();
            }
        };
        assert_eq!(got, want.to_string());
    }

    #[test]
    fn full() {
        let got = expand_ok(parse_quote! {
            #[job(topic = "orders.close", retry = ["0", 0, "2m", "1500ms"], lease = "30s", timeout = "1d")]
            enum Notify { Email(String), Sms }
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for Notify {
                const TOPIC: &'static str = "orders.close";
                type Output = ();
                fn retry_schedule() -> ::postpone::__private::RetrySchedule {
                    ::postpone::__private::schedule_from_millis(&[0, 0, 120000, 1500])
                }
                fn lease() -> ::postpone::__private::Option<::postpone::__private::Duration> {
                    ::postpone::__private::Option::Some(::postpone::__private::Duration::from_millis(30000))
                }
                fn timeout() -> ::postpone::__private::Option<::postpone::__private::Duration> {
                    ::postpone::__private::Option::Some(::postpone::__private::Duration::from_millis(86400000))
                }
            }
        };
        assert_eq!(got, want.to_string());
    }

    #[test]
    fn output_and_keep() {
        let got = expand_ok(parse_quote! {
            #[job(topic = "pdfs", output = Vec<Pdf>, keep = "1h")]
            struct Render { id: u64 }
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for Render {
                const TOPIC: &'static str = "pdfs";
                type Output = Vec<Pdf>;
                fn keep() -> ::postpone::__private::Option<::postpone::Keep> {
                    ::postpone::__private::Option::Some(::postpone::Keep::new(
                        ::postpone::__private::Duration::from_millis(3600000),
                        10000,
                    ))
                }
            }
        };
        assert_eq!(got, want.to_string());
        let last_only = expand_ok(parse_quote! {
            #[job(topic = "pdfs", keep_last = 50)]
            struct Render { id: u64 }
        });
        assert!(
            last_only.contains("from_millis (604800000) , 50"),
            "{last_only}"
        );
        let errors = expand_err(parse_quote! {
            #[job(topic = "pdfs", keep = "0", keep_last = 0)]
            struct Render { id: u64 }
        });
        assert!(
            errors[0].starts_with("keep must be longer than 0"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("keep_last must be at least 1"),
            "{errors:?}"
        );
    }

    #[test]
    fn partitions() {
        let got = expand_ok(parse_quote! {
            #[job(topic = "hot", partitions = 3)]
            struct Hot;
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for Hot {
                const TOPIC: &'static str = "hot";
                type Output = ();
                fn partitions() -> ::core::primitive::u16 {
                    3
                }
            }
        };
        assert_eq!(got, want.to_string());
    }

    #[test]
    fn flow_limits() {
        let got = expand_ok(parse_quote! {
            #[job(topic = "sms", rate = "100/s", max_running = 5)]
            struct Sms;
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for Sms {
                const TOPIC: &'static str = "sms";
                type Output = ();
                fn rate_limit() -> ::postpone::__private::Option<::postpone::__private::RateLimit> {
                    ::postpone::__private::Option::Some(::postpone::__private::RateLimit::new(
                        100,
                        ::postpone::__private::Duration::from_millis(1000),
                    ))
                }
                fn max_running() -> ::postpone::__private::Option<::core::primitive::u32> {
                    ::postpone::__private::Option::Some(5)
                }
            }
        };
        assert_eq!(got, want.to_string());
    }

    #[test]
    fn key() {
        let got = expand_ok(parse_quote! {
            #[job(topic = "shop.sync", key = "shop_id")]
            struct SyncShop { shop_id: u64, region: String }
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for SyncShop {
                const TOPIC: &'static str = "shop.sync";
                type Output = ();
                fn key(&self) -> ::postpone::__private::Option<::postpone::__private::String> {
                    ::postpone::__private::Option::Some(
                        ::postpone::__private::ToString::to_string(&self.shop_id)
                    )
                }
            }
        };
        assert_eq!(got, want.to_string());
        // `key = "type"` names the raw field `r#type`.
        let got = expand_ok(parse_quote! {
            #[job(topic = "shop.sync", key = "type")]
            struct SyncShop { r#type: String }
        });
        assert!(got.contains("to_string (& self . r#type)"), "{got}");
    }

    #[test]
    fn key_limits() {
        let got = expand_ok(parse_quote! {
            #[job(topic = "shop.sync", key = "shop_id", key_max_running = 2, key_rate = "10/s")]
            struct SyncShop { shop_id: u64 }
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for SyncShop {
                const TOPIC: &'static str = "shop.sync";
                type Output = ();
                fn key(&self) -> ::postpone::__private::Option<::postpone::__private::String> {
                    ::postpone::__private::Option::Some(
                        ::postpone::__private::ToString::to_string(&self.shop_id)
                    )
                }
                fn key_limits() -> ::postpone::__private::KeyLimits {
                    ::postpone::__private::KeyLimits::new()
                        .max_running(2)
                        .rate(::postpone::__private::RateLimit::new(
                            10,
                            ::postpone::__private::Duration::from_millis(1000),
                        ))
                }
            }
        };
        assert_eq!(got, want.to_string());
        // Without `key`, and each limit on its own.
        let got = expand_ok(parse_quote! {
            #[job(topic = "shop.sync", key_max_running = 3)]
            struct SyncShop;
        });
        let want = quote! {
            #[automatically_derived]
            impl ::postpone::Job for SyncShop {
                const TOPIC: &'static str = "shop.sync";
                type Output = ();
                fn key_limits() -> ::postpone::__private::KeyLimits {
                    ::postpone::__private::KeyLimits::new().max_running(3)
                }
            }
        };
        assert_eq!(got, want.to_string());
        let got = expand_ok(parse_quote! {
            #[job(topic = "shop.sync", key_rate = "5/m")]
            enum Sync { Shop(u64) }
        });
        assert!(
            got.contains(
                "KeyLimits :: new () . rate (:: postpone :: __private :: RateLimit :: new (5 , \
                 :: postpone :: __private :: Duration :: from_millis (60000) ,))"
            ),
            "{got}"
        );
        assert!(!got.contains("max_running"), "{got}");
    }

    #[test]
    fn key_must_name_a_field() {
        let errs = expand_err(parse_quote! {
            #[job(topic = "shop.sync", key = "shop")]
            struct SyncShop { shop_id: u64, r#type: String }
        });
        assert_eq!(
            errs,
            [
                "no field \"shop\" in `SyncShop`: key names a field of the struct (shop_id, type), whose \
                 value is the job's key for fairness"
            ]
        );
        let errs = expand_err(parse_quote! {
            #[job(topic = "shop.sync", key = "shop_id")]
            struct SyncShop {}
        });
        assert_eq!(
            errs,
            [
                "no field \"shop_id\" in `SyncShop`: key names a field of the struct (it has none), \
                 whose value is the job's key for fairness"
            ]
        );
        let not_named =
            "key takes a field of a struct with named fields; for other types give the key \
                         per enqueue with `.key(\"customer:42\")`";
        for input in [
            parse_quote! {
                #[job(topic = "shop.sync", key = "0")]
                struct SyncShop(u64);
            },
            parse_quote! {
                #[job(topic = "shop.sync", key = "shop_id")]
                struct SyncShop;
            },
            parse_quote! {
                #[job(topic = "shop.sync", key = "shop_id")]
                enum Sync { Shop { shop_id: u64 } }
            },
        ] {
            assert_eq!(expand_err(input), [not_named]);
        }
    }

    #[test]
    fn order_of_keys_and_trailing_comma_do_not_matter() {
        let got = expand_ok(parse_quote! {
            #[job(lease = "1m", topic = r"a-b_c.9",)]
            struct A;
        });
        assert!(got.contains("from_millis (60000)"), "{got}");
        assert!(got.contains(r#"r"a-b_c.9""#), "{got}");
    }

    #[test]
    fn rejects_generics_and_unions() {
        let errs = expand_err(parse_quote! {
            #[job(topic = "a")]
            struct Wrap<T> { inner: T }
        });
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].starts_with("`#[derive(Job)]` does not work on generic types"),
            "{errs:?}"
        );
        assert!(errs[0].contains("`Wrap<...>`"), "{errs:?}");

        let errs = expand_err(parse_quote! {
            #[job(topic = "a")]
            union U { a: u8 }
        });
        assert_eq!(
            errs,
            ["`#[derive(Job)]` works on structs and enums, not unions"]
        );
    }

    #[test]
    fn reports_every_error_at_once() {
        let errs = expand_err(parse_quote! {
            #[job(topic = "a b", retry = ["2x", "400d"], lease = "0", lease = "1s")]
            #[job(topic = "again")]
            struct Many<'a>(&'a str);
        });
        assert_eq!(errs.len(), 7, "{errs:#?}");
        assert!(errs[0].contains("generic types"));
        assert!(errs[1].starts_with(r#"invalid topic "a b": it holds ' '"#));
        assert!(errs[2].starts_with(r#"unparsable duration "2x" in retry"#));
        assert!(errs[3].starts_with(r#"retry slot 1 is "400d", longer than a year"#));
        assert!(errs[4].starts_with("lease must be longer than 0"));
        assert!(errs[5].starts_with("duplicate key `lease`"));
        assert!(errs[6].starts_with("more than one #[job] attribute"));
    }
}
