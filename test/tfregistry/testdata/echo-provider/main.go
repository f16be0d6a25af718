// Command terraform-provider-echo is the smallest real provider the tests install from a
// provider network mirror (test/tfregistry): one data source, echo, whose output is
// "echo: " and its input. hack/build-bin.sh echo-provider builds it with
// terraform-plugin-framework from the Go module proxy into the tool cache; it is a module of its
// own (this folder's go.mod), so CAPTF's go.mod does not depend on the framework.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type echoProvider struct{}

func (p *echoProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "echo"
	resp.Version = "1.0.0"
}
func (p *echoProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{}
}
func (p *echoProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}
func (p *echoProvider) Resources(context.Context) []func() resource.Resource { return nil }
func (p *echoProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &echoData{} }}
}

type echoData struct{}
type echoModel struct {
	Input  types.String `tfsdk:"input"`
	Output types.String `tfsdk:"output"`
}

func (d *echoData) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName
}
func (d *echoData) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"input":  schema.StringAttribute{Required: true},
		"output": schema.StringAttribute{Computed: true},
	}}
}
func (d *echoData) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m echoModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.Output = types.StringValue("echo: " + m.Input.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &echoProvider{} },
		providerserver.ServeOpts{Address: "providers.captf.test/captf-test/echo"})
	if err != nil {
		log.Fatal(err)
	}
}
