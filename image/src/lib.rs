//! Images through the Docker engine, for the two programs that move them: `sheepctl image
//! push` and `shepherd-agent bootstrap-image --push` tag a local image into a registry and
//! push it ([`push`]); the agent pulls with the sign-in of its cluster's registry
//! ([`RegistryLogin::credentials_for`]). Image references are read by `shared::image`.

use bollard::Docker;
use bollard::auth::DockerCredentials;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::{PushImageOptionsBuilder, TagImageOptionsBuilder};
use futures::StreamExt;
use shared::image::Reference;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Registry(String),
    #[error("image {image} is not on this machine: {message}")]
    Missing { image: String, message: String },
    #[error("failed to tag {image} as {target}: {message}")]
    Tag { image: String, target: String, message: String },
    #[error("failed to push {target}: {message}")]
    Push { target: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A user and password for one registry, sent to that registry only. Its `Debug` hides the
/// password, so that no log line or error carries it.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryLogin {
    /// `HOST:PORT`, as image references name it.
    pub registry: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for RegistryLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryLogin").field("registry", &self.registry).field("username", &self.username).finish_non_exhaustive()
    }
}

impl RegistryLogin {
    /// The credentials to send with a pull or push of `image`: only when the image comes
    /// from this login's registry, so that a pod naming another registry never learns them.
    pub fn credentials_for(&self, image: &str) -> Option<DockerCredentials> {
        (Reference::parse(image).registry == Some(self.registry.as_str())).then(|| DockerCredentials {
            username: Some(self.username.clone()),
            password: Some(self.password.clone()),
            serveraddress: Some(self.registry.clone()),
            ..Default::default()
        })
    }
}

/// The engine's words of a failed call: a stream's error or the answer's message.
pub fn engine_message(error: BollardError) -> String {
    match error {
        BollardError::DockerResponseServerError { message, .. } => message,
        BollardError::DockerStreamError { error } => error,
        other => other.to_string(),
    }
}

/// Tags the local `image` as `registry/repository:tag` and pushes it there with `login`'s
/// credentials (when it is for that registry). Returns the pushed reference.
pub async fn push(docker: &Docker, image: &str, registry: &str, login: Option<&RegistryLogin>) -> Result<String> {
    if let Some(message) = shared::image::registry_error(registry) {
        return Err(Error::Registry(message));
    }
    docker.inspect_image(image).await.map_err(|e| Error::Missing { image: image.to_string(), message: engine_message(e) })?;
    let reference = Reference::parse(image);
    let target = reference.in_registry(registry);
    let (repository, tag) = target.rsplit_once(':').expect("in_registry writes a tag");
    let options = TagImageOptionsBuilder::default().repo(repository).tag(tag).build();
    docker.tag_image(image, Some(options)).await.map_err(|e| Error::Tag {
        image: image.to_string(),
        target: target.clone(),
        message: engine_message(e),
    })?;
    // Docker 20.10 refuses a push without an X-Registry-Auth header, so an empty one is
    // sent when there is nothing to sign in with.
    let credentials = login.and_then(|l| l.credentials_for(&target)).unwrap_or_default();
    let options = PushImageOptionsBuilder::default().tag(tag).build();
    let mut progress = docker.push_image(repository, Some(options), Some(credentials));
    while let Some(step) = progress.next().await {
        step.map_err(|e| Error::Push { target: target.clone(), message: engine_message(e) })?;
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login() -> RegistryLogin {
        RegistryLogin { registry: "m1:5000".into(), username: "node-1".into(), password: "s3cret-token".into() }
    }

    #[test]
    fn credentials_go_to_their_own_registry_only() {
        let sent = login().credentials_for("m1:5000/minimal:1").expect("the login's registry");
        assert_eq!((sent.username.as_deref(), sent.password.as_deref()), (Some("node-1"), Some("s3cret-token")));
        assert_eq!(sent.serveraddress.as_deref(), Some("m1:5000"));
        for elsewhere in ["m2:5000/minimal:1", "minimal", "evil.example/m1:5000/x"] {
            assert!(login().credentials_for(elsewhere).is_none(), "{elsewhere}");
        }
    }

    #[test]
    fn the_password_is_never_printed() {
        let printed = format!("{:?}", login());
        assert!(printed.contains("node-1") && !printed.contains("s3cret"), "{printed}");
    }
}
