// Package controller is the cluster-side half of edgeota's upgrade model: for
// DaemonSets that opt in with the apps.openyurt.io/update-strategy annotation
// (and use the OnDelete update strategy) it keeps the OTA pod conditions the
// node agent serves, pre-pulls images on request, and rolls pods past
// disconnected nodes, which the native RollingUpdate cannot do.
package controller
