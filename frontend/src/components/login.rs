//! The token dialog, shown when the server answers 401. The token is kept in local storage
//! and sent as `Authorization: Bearer <token>`.

use web_sys::HtmlInputElement;
use yew::prelude::*;

use crate::context::use_session;
use crate::session::SessionAction;

#[derive(Properties, PartialEq)]
pub struct LoginProps {
    /// What the server said.
    pub message: String,
}

#[component]
pub fn Login(props: &LoginProps) -> Html {
    let session = use_session();
    let input = use_node_ref();
    let onsubmit = {
        let input = input.clone();
        let session = session.clone();
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            if let Some(field) = input.cast::<HtmlInputElement>() {
                session.dispatch(SessionAction::LogIn(field.value().trim().to_string()));
            }
        })
    };
    html! {
        <div class="overlay">
            <form class="dialog" {onsubmit} data-testid="login-dialog">
                <h2>{ "Sign in" }</h2>
                <p>{ &props.message }</p>
                <p class="hint">{ "Paste the token the server was started with (SHEPHERD_TOKEN). It stays in this browser's local storage." }</p>
                <input ref={input} type="password" placeholder="token" autofocus=true data-testid="login-token" />
                <button type="submit" class="primary" data-testid="login-submit">{ "Use token" }</button>
            </form>
        </div>
    }
}
