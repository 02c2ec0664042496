//! A stand-in for redis-rs's unpublished `test_macros::async_test`: runs an async test
//! on tokio; a `bool` parameter with both values; an `impl Trait` parameter with a
//! multiplexed connection and (feature connection-manager) a connection manager.
use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{parse_macro_input, FnArg, ItemFn, Type};

#[proc_macro_attribute]
pub fn async_test(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let f = parse_macro_input!(item as ItemFn);
    let name = f.sig.ident.clone();
    let attrs = f.attrs.clone();
    let mut inner = f.clone();
    // (The test's `cfg`s hold for the function it calls too.)
    inner.attrs.retain(|a| a.path().is_ident("cfg"));
    let inner_name = format_ident!("__{}_inner", name);
    inner.sig.ident = inner_name.clone();
    let params: Vec<_> = f.sig.inputs.iter().collect();
    let call = if params.is_empty() {
        quote! { #inner_name().await; }
    } else {
        let FnArg::Typed(p) = params[0] else {
            panic!("#[async_test] on a method")
        };
        match &*p.ty {
            Type::Path(tp) if tp.path.is_ident("bool") => quote! {
                #inner_name(false).await;
                #inner_name(true).await;
            },
            _ => quote! {
                {
                    let ctx = TestContext::new();
                    let con = ctx.async_connection().await.unwrap();
                    #inner_name(con).await;
                }
                #[cfg(feature = "connection-manager")]
                {
                    let ctx = TestContext::new();
                    let con = ctx.client.get_connection_manager().await.unwrap();
                    #inner_name(con).await;
                }
            },
        }
    };
    quote! {
        #inner
        #(#attrs)*
        #[test]
        fn #name() {
            block_on_all(async move { #call }, RuntimeType::Tokio);
        }
    }
    .into()
}
