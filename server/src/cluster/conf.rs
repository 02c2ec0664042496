//! The cluster configuration file (`cluster-config-file`, `nodes.conf`), in
//! redis-server's format: a CLUSTER NODES line per node (nodes in handshake left out),
//! then `vars currentEpoch N lastVoteEpoch M`.

use std::io::Write;
use std::path::Path;

use goblin_store::Millis;
use goblin_store::SLOTS;

use super::{FAIL, HANDSHAKE, MASTER, MYSELF, NOADDR, NOFAILOVER, Node, SLAVE, State, parse_id};

/// The file's text for `state`.
pub fn render(state: &State) -> String {
    let mut out = String::new();
    for node in state
        .sorted_nodes()
        .into_iter()
        .filter(|n| n.flags & HANDSHAKE == 0)
    {
        out.push_str(&state.node_line(node));
        out.push('\n');
    }
    out.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        state.current_epoch, state.last_vote_epoch
    ));
    out
}

/// Writes `text` to `path` whole or not at all: a temporary file beside it, synced, then
/// renamed over it.
///
/// # Errors
/// When the file cannot be written.
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `ip:port@cport[,hostname]` → its parts (without the hostname: [`hostname_of`]).
pub fn parse_address(text: &str) -> Option<(String, u16, u16)> {
    let text = text.split(',').next()?;
    let (addr, cport) = match text.split_once('@') {
        Some((addr, cport)) => (addr, cport.parse().ok()?),
        None => (text, 0),
    };
    let (ip, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let cport = if cport == 0 {
        port.wrapping_add(10000)
    } else {
        cport
    };
    Some((ip.to_string(), port, cport))
}

/// The hostname of an address `ip:port@cport,hostname` ("" without one).
pub fn hostname_of(text: &str) -> &str {
    text.split_once(',').map_or("", |(_, h)| h)
}

/// The state a configuration file describes.
///
/// # Errors
/// What is wrong with the file.
pub fn parse(text: &str, now: Millis) -> Result<State, String> {
    let mut myself = None;
    let mut nodes = Vec::new();
    let mut open = Vec::new();
    let mut epochs = (0, 0);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        if words[0] == "vars" {
            let mut i = 1;
            while i + 1 < words.len() {
                let value = words[i + 1]
                    .parse()
                    .map_err(|_| format!("bad vars: {line}"))?;
                match words[i] {
                    "currentEpoch" => epochs.0 = value,
                    "lastVoteEpoch" => epochs.1 = value,
                    _ => {}
                }
                i += 2;
            }
            continue;
        }
        if words.len() < 8 {
            return Err(format!("a line with too few fields: {line}"));
        }
        let id = parse_id(words[0].as_bytes()).ok_or_else(|| format!("bad node name: {line}"))?;
        let (ip, port, cport) =
            parse_address(words[1]).ok_or_else(|| format!("bad address: {line}"))?;
        let mut flags = 0;
        for f in words[2].split(',') {
            flags |= match f {
                "myself" => MYSELF,
                "master" => MASTER,
                "slave" => SLAVE,
                "fail" => FAIL,
                "noaddr" => NOADDR,
                "nofailover" => NOFAILOVER,
                _ => 0,
            };
        }
        if flags & SLAVE == 0 {
            flags |= MASTER;
        }
        let mut node = Node::new(id, &ip, port, cport, flags, now);
        node.shard_id = id;
        node.hostname = hostname_of(words[1]).to_string();
        if flags & SLAVE != 0 {
            node.master = parse_id(words[3].as_bytes());
        }
        node.config_epoch = words[6].parse().map_err(|_| format!("bad epoch: {line}"))?;
        for slot in &words[8..] {
            if let Some(open_slot) = slot.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                open.push(open_slot.to_string());
                continue;
            }
            let (first, last) = match slot.split_once('-') {
                Some((a, b)) => (a.parse(), b.parse()),
                None => (slot.parse(), slot.parse()),
            };
            let (Ok(first), Ok(last)) = (first, last) else {
                return Err(format!("bad slot: {line}"));
            };
            let (first, last): (usize, usize) = (first, last);
            if first > last || last >= SLOTS {
                return Err(format!("bad slot range: {line}"));
            }
            for s in first..=last {
                node.set_slot(s, true);
            }
        }
        if flags & MYSELF != 0 {
            myself = Some(id);
        }
        nodes.push(node);
    }
    let myself = myself.ok_or("no line for this node (myself)")?;
    let mut state = State::new(myself, 0, 0, now);
    state.nodes.clear();
    for node in nodes {
        for slot in 0..SLOTS {
            if node.has_slot(slot) {
                state.slots[slot] = Some(node.id);
            }
        }
        state.nodes.insert(node.id, node);
    }
    // A node line may claim a slot another claimed: the later one holds it.
    for id in state.nodes.keys().copied().collect::<Vec<_>>() {
        for slot in 0..SLOTS {
            if state.slots[slot] != Some(id)
                && let Some(n) = state.nodes.get_mut(&id)
            {
                n.set_slot(slot, false);
            }
        }
    }
    for item in open {
        if let Some((slot, to)) = item.split_once("->-") {
            if let (Ok(slot), Some(to)) = (slot.parse::<usize>(), parse_id(to.as_bytes()))
                && slot < SLOTS
            {
                state.migrating_to.insert(slot, to);
            }
        } else if let Some((slot, from)) = item.split_once("-<-")
            && let (Ok(slot), Some(from)) = (slot.parse::<usize>(), parse_id(from.as_bytes()))
            && slot < SLOTS
        {
            state.importing_from.insert(slot, from);
        }
    }
    // A replica is in its master's shard.
    let shards: Vec<(super::NodeId, super::NodeId)> = state
        .nodes
        .values()
        .filter_map(|n| Some((n.id, state.nodes.get(&n.master?)?.shard_id)))
        .collect();
    for (id, shard) in shards {
        if let Some(n) = state.nodes.get_mut(&id) {
            n.shard_id = shard;
            if let Some(m) = n.master {
                state.has_replica(&m);
            }
        }
    }
    state.current_epoch = epochs.0.max(state.max_epoch());
    state.last_vote_epoch = epochs.1;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_back_as_written() {
        let text = "\
cf21c207afbdec69617c01a9679b25c7fcc98fac 127.0.0.1:7103@17103 master - 0 1796279349685 3 connected 10923-16383
50b096430fc57cf700963eb28fc7fb836d1659f5 127.0.0.1:7101@17101 myself,master - 0 0 1 connected 0-5460 6000 [5460->-cf21c207afbdec69617c01a9679b25c7fcc98fac]
vars currentEpoch 3 lastVoteEpoch 0
";
        let state = parse(text, 1).expect("the file parses");
        assert_eq!(
            super::super::id_str(&state.myself),
            "50b096430fc57cf700963eb28fc7fb836d1659f5"
        );
        assert_eq!(state.current_epoch, 3);
        assert_eq!(state.me().slot_ranges(), vec![(0, 5460), (6000, 6000)]);
        assert_eq!(state.migrating_to.len(), 1);
        let again = parse(&render(&state), 1).expect("what it wrote parses");
        assert_eq!(render(&again), render(&state));
        assert!(parse("garbage\n", 1).is_err());

        // A replica's line names its master, and it shares its master's shard.
        let text = "\
cf21c207afbdec69617c01a9679b25c7fcc98fac 127.0.0.1:7103@17103 master - 0 1796279349685 3 connected 0-16383
50b096430fc57cf700963eb28fc7fb836d1659f5 127.0.0.1:7101@17101 myself,slave cf21c207afbdec69617c01a9679b25c7fcc98fac 0 0 3 connected
vars currentEpoch 3 lastVoteEpoch 2
";
        let state = parse(text, 1).expect("the file parses");
        let master = state.my_master().expect("its master is known");
        assert_eq!(master.name(), "cf21c207afbdec69617c01a9679b25c7fcc98fac");
        assert_eq!(state.me().shard_id, master.shard_id);
        assert_eq!(state.last_vote_epoch, 2);
        assert!(render(&state).contains("myself,slave cf21c207afbdec69617c01a9679b25c7fcc98fac"));
        assert!(parse("vars currentEpoch x\n", 1).is_err());
    }
}
