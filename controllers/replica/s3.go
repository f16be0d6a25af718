package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// S3Options say how to reach an S3-compatible bucket. Credentials are given, never taken from
// the process's environment or a shared AWS profile: the platform names them (a Secret of the
// manager's namespace), and nothing else the manager's process can see is used.
type S3Options struct {
	// Endpoint is the store's URL (https://s3.example.com, or http://127.0.0.1:7070 for a local
	// one); "" uses AWS S3 of Region.
	Endpoint string
	// Region is the bucket's region (default us-east-1).
	Region string
	// Bucket is the bucket's name.
	Bucket string
	// AccessKeyID and SecretAccessKey are the credentials.
	AccessKeyID, SecretAccessKey string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key), as most S3-compatible
	// servers want, instead of as a host name (bucket.endpoint/key).
	PathStyle bool
}

// OpenS3 opens an S3-compatible bucket; the caller closes it.
func OpenS3(ctx context.Context, o S3Options) (*blob.Bucket, error) {
	if o.Bucket == "" {
		return nil, errors.New("the replica store needs a bucket name")
	}
	if o.AccessKeyID == "" || o.SecretAccessKey == "" {
		return nil, errors.New("the replica store needs an access key id and a secret access key")
	}
	region := o.Region
	if region == "" {
		region = "us-east-1"
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, ""),
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
	})
	b, err := s3blob.OpenBucket(ctx, client, o.Bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", o.Bucket, err)
	}
	return b, nil
}
