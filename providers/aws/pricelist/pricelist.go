// Package pricelist reads the AWS Pricing API's EC2 price lists: the filters that select a
// region's on-demand Linux prices, and the parser of one price list entry. The AWS provider
// and hack/pricing-table share it; it holds no prices and makes no calls.
package pricelist

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// OnDemandFilters select Linux, shared-tenancy, on-demand, no-preinstalled-software EC2
// prices of a region, as upstream's pricing provider asks for them.
func OnDemandFilters(region string) []pricingtypes.Filter {
	f := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(value)}
	}
	return []pricingtypes.Filter{
		f("regionCode", region), f("serviceCode", "AmazonEC2"), f("preInstalledSw", "NA"), f("operatingSystem", "Linux"),
		f("capacitystatus", "Used"), f("marketoption", "OnDemand"), f("tenancy", "Shared"), f("licenseModel", "No License required"),
	}
}

// priceListItem is the part of a Pricing API price list entry read here.
type priceListItem struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParseOnDemandPrice reads an instance type and its hourly USD price from one price list
// entry of GetProducts (a JSON document as a string).
func ParseOnDemandPrice(item string) (string, float64, error) {
	var it priceListItem
	if err := json.Unmarshal([]byte(item), &it); err != nil {
		return "", 0, fmt.Errorf("a price list entry is not JSON: %w", err)
	}
	for _, term := range it.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if usd, ok := dim.PricePerUnit["USD"]; ok {
				v, err := strconv.ParseFloat(usd, 64)
				if err != nil {
					return "", 0, fmt.Errorf("price %q of %s: %w", usd, it.Product.Attributes.InstanceType, err)
				}
				return it.Product.Attributes.InstanceType, v, nil
			}
		}
	}
	return it.Product.Attributes.InstanceType, 0, nil
}

// Region is the region whose Pricing API endpoint serves a region's prices: the API is in
// us-east-1, eu-central-1, ap-south-1 and cn-northwest-1 only (upstream's rule).
func Region(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	case strings.HasPrefix(region, "eu-"), strings.HasPrefix(region, "me-"), strings.HasPrefix(region, "af-"), strings.HasPrefix(region, "il-"):
		return "eu-central-1"
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	}
	return "us-east-1"
}
