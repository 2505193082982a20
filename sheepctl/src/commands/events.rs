//! `sheepctl events [-w] [--for KIND/NAME [--all-instances]] [--types T,…] [--field-selector S]`:
//! what happened, oldest first —
//! for the seed's walk-through, Created → Scheduled → Pulled → Started → Running — and, with
//! `-w`, each new event (or repeat of one) as it is recorded. `--for` means the object that
//! has the name now, by its uid, as `describe` and the dashboard show it.

use anyhow::{Result, bail};
use shared::api::{List, WatchEventType};
use shared::model::{Kind, Object, ObjectMeta, event_types};

use super::context::Context;
use super::output::{print, serialized};
use crate::cli::{EventsArgs, OutputFormat};
use crate::settings;
use crate::table;
use crate::view::{self, RowContext};

pub async fn run(context: &Context, args: &EventsArgs) -> Result<()> {
    let about = match &args.for_object {
        Some(word) => {
            let (kind, name) = settings::targets(std::slice::from_ref(word))?.remove(0);
            Some((kind, subject(context, kind, &name, args.all_instances).await?))
        }
        None => None,
    };
    let types = event_types_wanted(&args.types)?;
    let wanted = |object: &Object| match (&about, object) {
        (_, Object::Event(e)) if !types.is_empty() && !types.contains(&e.type_.as_str()) => false,
        (None, _) => true,
        (Some((kind, meta)), Object::Event(e)) => e.involved_object.refers_to(*kind, meta),
        _ => false,
    };
    let scope = context.settings.list_scope();
    let fields = args.field_selector.clone().filter(|f| !f.trim().is_empty());
    let mut watcher = context.changes(Kind::Event, scope, None, fields);
    let mut events: Vec<Object> = watcher.list().await?.into_iter().filter(|o| wanted(o)).collect();
    view::sort_events(&mut events);

    let mut row_context = RowContext {
        now: context.now(),
        wide: args.output == Some(OutputFormat::Wide),
        all_namespaces: scope.is_none(),
        node_usage: None,
        nodes: shared::readiness::NodeJudge::default(),
    };
    let table = view::table(Kind::Event, &events, &row_context);
    match args.output {
        None | Some(OutputFormat::Wide) if events.is_empty() && !args.watch => {
            match scope {
                Some(ns) => eprintln!("No events found in namespace {ns:?}."),
                None => eprintln!("No events found."),
            }
            return Ok(());
        }
        None | Some(OutputFormat::Wide) => print(&table.render())?,
        Some(OutputFormat::Name) => print(&events.iter().map(|o| view::object_name(o) + "\n").collect::<String>())?,
        Some(format) if !args.watch => {
            let list = List::whole("EventList", watcher.resource_version(), events);
            return print(&serialized(&list, format)?);
        }
        Some(format) => {
            for event in &events {
                print(&serialized(event, format)?)?;
            }
        }
    }
    if !args.watch {
        return Ok(());
    }
    let widths = table.widths();
    loop {
        let change = watcher.next().await?;
        // A deleted event is only housekeeping; a repeat comes as MODIFIED with a new count.
        if change.type_ == WatchEventType::Deleted || !wanted(&change.object) {
            continue;
        }
        row_context.now = context.now();
        let text = match args.output {
            None | Some(OutputFormat::Wide) => table::line(&view::row(&change.object, &row_context), &widths),
            Some(OutputFormat::Name) => view::object_name(&change.object) + "\n",
            Some(format) => serialized(&change.object, format)?,
        };
        print(&text)?;
    }
}

/// The types `--types` names, as the model spells them; none is every type. As kubectl
/// reads them, in any case.
fn event_types_wanted(words: &[String]) -> Result<Vec<&'static str>> {
    let known = [event_types::NORMAL, event_types::WARNING];
    let mut types = Vec::new();
    for word in words.iter().map(|w| w.trim()).filter(|w| !w.is_empty()) {
        match known.iter().find(|t| t.eq_ignore_ascii_case(word)) {
            Some(t) => types.push(*t),
            None => bail!("--types {word:?}: an event's type is {} or {}", known[0], known[1]),
        }
    }
    Ok(types)
}

/// Whose events `--for` shows: the object of that name as it is now (its uid included), or,
/// with `--all-instances` or when none has the name now, any object that had it.
async fn subject(context: &Context, kind: Kind, name: &str, all_instances: bool) -> Result<ObjectMeta> {
    let namespace = &context.settings.namespace;
    let any_instance = ObjectMeta { namespace: namespace.clone(), name: name.to_string(), ..ObjectMeta::default() };
    if all_instances {
        return Ok(any_instance);
    }
    match context.client.get_object(kind, namespace, name).await {
        Ok(object) => Ok(object.metadata().clone()),
        Err(e) if e.is_not_found() => {
            eprintln!(
                "{}/{name} does not exist now: these are the events of every earlier one of that name.",
                kind.as_str().to_ascii_lowercase()
            );
            Ok(any_instance)
        }
        Err(e) => Err(e.into()),
    }
}
