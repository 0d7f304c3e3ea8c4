// Package wire is the contract between the relay's roles: the
// JetStream streams and subjects they share, the messages on them, and the
// cursor clients resume with. Every role imports it; nothing else defines a
// subject or a frame.
//
// The protocol, section by section (Protocol flow, Offers, Fencing,
// Cancellation, Partitions, Cursors, which the rest of the code cites as
// wire "Offers" and so on): README.md beside this file.
package wire
