package localcluster

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig for this cluster at path, authenticating
// with a bearer token (a service account's, not the admin's) and reaching the
// API server at server (e.g. "https://" + a Proxy's Addr). An empty server
// means the API server itself; an empty token means the admin's certificate.
func (c *Cluster) WriteKubeconfig(path, server, token string) error {
	if server == "" {
		server = c.Config.Host
	}
	user := &clientcmdapi.AuthInfo{Token: token}
	if token == "" {
		user = &clientcmdapi.AuthInfo{ClientCertificate: c.Config.CertFile, ClientKey: c.Config.KeyFile}
	}
	config := clientcmdapi.NewConfig()
	config.Clusters[c.Name] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: c.CAFile()}
	config.AuthInfos[c.Name] = user
	config.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	config.CurrentContext = c.Name
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
