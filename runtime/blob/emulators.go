package blob

// The URL parameters that point gs:// and azblob:// at a server of one's
// own (an emulator, a private endpoint) from the store's URL alone: gocloud
// takes GCS's endpoint only from STORAGE_EMULATOR_HOST, and Azurite's key
// only from AZURE_STORAGE_* variables, and a worker's one setting is its
// URL (TROUPE_BLOB_URL).

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/option"
)

// AzuriteAccount and AzuriteKey are the Azure Storage emulator's (Azurite's)
// default account and its key: public development credentials, which every
// Azurite accepts unless told otherwise, and no real account does.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// openBucket opens the gocloud bucket of url, through the openers below
// for the URLs they take, through gocloud's own for the others. The
// closer it returns, if any, is what the bucket's Close does not release.
func openBucket(ctx context.Context, url string) (*blob.Bucket, func() error, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, nil, err
	}
	q := u.Query()
	switch {
	case u.Scheme == gcsblob.Scheme && q.Has("endpoint"):
		o := &gcsEndpoint{}
		mux := new(blob.URLMux)
		mux.RegisterBucket(gcsblob.Scheme, o)
		b, err := mux.OpenBucketURL(ctx, u)
		if err != nil {
			return nil, nil, err
		}
		return b, o.client.Close, nil
	case u.Scheme == azureblob.Scheme && isTrue(q.Get("localemu")) && !azureCredentialsInEnv():
		mux := new(blob.URLMux)
		mux.RegisterBucket(azureblob.Scheme, azuriteOpener())
		b, err := mux.OpenBucketURL(ctx, u)
		return b, nil, err
	}
	b, err := blob.OpenBucket(ctx, url)
	return b, nil, err
}

func isTrue(s string) bool {
	b, _ := strconv.ParseBool(s)
	return b
}

// gcsEndpoint opens gs://BUCKET?endpoint=URL[&anonymous=true]: the bucket
// on the server at URL (scheme, host and port; the JSON API's path,
// /storage/v1/, is added when URL has none), with no credentials when
// anonymous is true (an emulator), with Application Default Credentials
// otherwise.
type gcsEndpoint struct {
	client *storage.Client
}

func (o *gcsEndpoint) OpenBucketURL(ctx context.Context, u *neturl.URL) (*blob.Bucket, error) {
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "anonymous" {
			return nil, fmt.Errorf("gs:// with endpoint takes the parameters endpoint and anonymous only, not %q", k)
		}
	}
	ep, err := neturl.Parse(q.Get("endpoint"))
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		return nil, fmt.Errorf("gs:// endpoint %q is not an http:// or https:// URL", q.Get("endpoint"))
	}
	if ep.Path == "" || ep.Path == "/" {
		ep.Path = "/storage/v1/"
	}
	opts := []option.ClientOption{option.WithEndpoint(ep.String())}
	if a := q.Get("anonymous"); a != "" {
		anon, err := strconv.ParseBool(a)
		if err != nil {
			return nil, fmt.Errorf("gs:// anonymous=%q is not a boolean", a)
		}
		if anon {
			opts = append(opts, option.WithoutAuthentication())
		}
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, err
	}
	b, err := gcsblob.OpenBucket(ctx, nil, u.Host, &gcsblob.Options{Client: c})
	if err != nil {
		c.Close()
		return nil, err
	}
	o.client = c
	return b, nil
}

// azureCredentialsInEnv reports whether the environment gives azureblob
// credentials of its own, which it then uses, emulator or not.
func azureCredentialsInEnv() bool {
	for _, k := range []string{"AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// azuriteOpener opens azblob://CONTAINER?localemu=true&... with the
// emulator's well-known credentials when the environment gives none: the
// account AzuriteAccount, or another (storage_account= or
// AZURE_STORAGE_ACCOUNT) whose key must then be in AZURE_STORAGE_KEY.
func azuriteOpener() *azureblob.URLOpener {
	svc := azureblob.NewDefaultServiceURLOptions()
	if svc.AccountName == "" {
		svc.AccountName = AzuriteAccount
	}
	return &azureblob.URLOpener{
		ServiceURLOptions: *svc,
		MakeClient: func(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
			// The emulator's service URL ends in the account
			// (http://HOST/ACCOUNT), whichever way it was named.
			account := string(svcURL)[strings.LastIndex(string(svcURL), "/")+1:]
			if account != AzuriteAccount {
				return nil, fmt.Errorf("azblob:// emulator account %q: its key goes in AZURE_STORAGE_KEY (only %s's is known)", account, AzuriteAccount)
			}
			cred, err := azblob.NewSharedKeyCredential(account, AzuriteKey)
			if err != nil {
				return nil, err
			}
			u, err := neturl.JoinPath(string(svcURL), string(name))
			if err != nil {
				return nil, err
			}
			return container.NewClientWithSharedKeyCredential(u, cred, nil)
		},
	}
}
