// Package appreason spells the reasons of the owner's view (the node agent's
// ListUpgrades and WatchUpgrades) that its clients act on, in one place for
// the agent, which sets them, and otactl, which reads them: a package of
// constants alone, so that otactl links nothing of the agent.
package appreason

// The reasons of an app upgraded in place.
const (
	// UpgradeRequested: UPGRADING once the owner asked for the upgrade in
	// place the controller offered; the controller patches the pod next.
	UpgradeRequested = "UpgradeRequested"
	// UpdatingInPlace: UPGRADING once the pod's images were patched, until
	// its new containers run and are Ready (unless the kubelet gives a
	// reason of its own, such as ErrImagePull).
	UpdatingInPlace = "UpdatingInPlace"
	// UpgradeRequestRefused: FAILED when the controller did not carry the
	// owner's request out: the rollout halted, or moved on to another
	// revision, which the owner may ask for anew.
	UpgradeRequestRefused = "UpgradeRequestRefused"
)
