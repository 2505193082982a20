//! `sheepctl events [-w] [--for KIND/NAME]`: what happened, oldest first — for the seed's
//! walk-through, Created → Scheduled → Pulled → Started → Running — and, with `-w`, each new
//! event (or repeat of one) as it is recorded.

use anyhow::Result;
use shared::api::{List, WatchEventType};
use shared::model::{Kind, Object};

use super::{Context, print, serialized};
use crate::cli::{EventsArgs, OutputFormat};
use crate::settings;
use crate::table;
use crate::view::{self, RowContext};

pub async fn run(context: &Context, args: &EventsArgs) -> Result<()> {
    let about = match &args.for_object {
        Some(word) => Some(settings::targets(std::slice::from_ref(word))?.remove(0)),
        None => None,
    };
    let wanted = |object: &Object| match (&about, object) {
        (None, _) => true,
        (Some((kind, name)), Object::Event(e)) => {
            Kind::from_alias(&e.involved_object.kind) == Some(*kind) && e.involved_object.name == *name
        }
        _ => false,
    };
    let scope = context.settings.list_scope();
    let mut watcher = context.changes(Kind::Event, scope, None);
    let mut events: Vec<Object> = watcher.list().await?.into_iter().filter(|o| wanted(o)).collect();
    view::sort_events(&mut events);

    let mut row_context = RowContext {
        now: context.now(),
        wide: args.output == Some(OutputFormat::Wide),
        all_namespaces: scope.is_none(),
        node_usage: None,
        nodes: crate::view::NodeJudge::default(),
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
            let list = List { kind: "EventList".to_string(), resource_version: watcher.resource_version(), items: events };
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
