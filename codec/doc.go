// Package codec encrypts the payloads Troupe sends through Temporal, so
// that no prompt, tool output, transcript reference, approval argument or
// deal term is plain text in a workflow's history, in the server's
// database, or to anyone who can read the namespace.
//
// # The contract
//
//  1. A Codec holds AES-256-GCM keys by id, one of them active. Encode
//     seals each payload whole (its data and its metadata) with the active
//     key and a fresh nonce, and names the key in the sealed payload's
//     metadata (MetadataKeyID); Decode opens a payload with the key its
//     metadata names, whichever of the Codec's keys that is. So keys
//     rotate by id: add the new key everywhere, then make it active;
//     payloads sealed with the old one stay readable for as long as the
//     old key is kept.
//  2. Decode passes payloads that are not sealed (from before the codec was
//     turned on) through unchanged; a sealed payload whose key the Codec
//     lacks, or whose key of that id is another key, is a *KeyError that
//     names the key id: never garbage.
//  3. A Codec with no keys seals nothing, and its Decode fails on every
//     sealed payload with a *KeyError that says how to give the process the
//     key: a process that was not given keys says so, where the SDK's own
//     converter would say "payload encoding is not supported".
//  4. FromEnv reads the keys the way every troupe command does:
//     TROUPE_CODEC_KEY_FILE (a file of keys, mode 0600),
//     TROUPE_CODEC_KEYS (keys in the environment) and TROUPE_CODEC_KEY_ID
//     (the active key's id). Apply puts the codec on a Temporal client's
//     options: its data converter and a failure converter that seals error
//     messages and stack traces too. Workers made from that client use
//     them, so dial once with them.
//  5. Handler serves Decode (and Encode) over HTTP for the Temporal Web UI
//     and the temporal CLI (their "codec server"), with CORS for the UI's
//     origins and an optional bearer token.
//
// # What it does not hide
//
// Search attributes, workflow and activity ids and types, task queue
// names, timer and retry settings, and the types of errors
// (ApplicationError.Type) are not payloads: the server needs them as they
// are. Troupe puts nothing a user wrote into them.
package codec
