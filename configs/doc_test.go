// Package configs_test holds the tests of what configs/ ships besides the
// roles' example configurations (those load in relay/config): the Helm
// chart, the compose file and the systemd units. Each is parsed strictly
// and held to the repository it points into (roles, config files, drain
// timeouts), since a deployment file is only read by a machine that is
// not here.
package configs_test
